//! User-supplied text in messages. A key, a value or a path the user
//! wrote can hold control characters (an escape sequence, a NUL, a
//! newline that forges a line); none reaches the terminal as such.

/// `text` as a message quotes it: every control character escaped
/// (`\u{1b}`, `\n`, `\0`), the rest as written.
pub(crate) fn shown(text: &str) -> String {
    escape(text, |_| true)
}

/// A whole message for the terminal: control characters escaped but
/// newlines and tabs, which lay a message out (the values it quotes went
/// through [`shown`]).
pub(crate) fn terminal(text: &str) -> String {
    escape(text, |c| c != '\n' && c != '\t')
}

/// Whether `text` has a control character [`shown`] would escape.
pub(crate) fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

fn escape(text: &str, escaped: impl Fn(char) -> bool) -> String {
    if !text.chars().any(|c| c.is_control() && escaped(c)) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() && escaped(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_pass() {
        assert_eq!(shown("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(shown("two\nlines\0"), "two\\nlines\\u{0}");
        assert_eq!(shown("θ plain"), "θ plain");
        assert_eq!(terminal("line 1\n\tline 2\u{7}"), "line 1\n\tline 2\\u{7}");
        assert!(has_control("x\ry") && !has_control("x y"));
    }
}
