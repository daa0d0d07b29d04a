//! User-supplied text in messages. A key, a value or a path the user
//! wrote can hold control characters (an escape sequence, a NUL, a
//! newline that forges a line) or a bidirectional control (U+202E turns
//! the rest of a line around); none reaches the terminal as such.

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
    text.chars().any(is_control)
}

/// A control character, or a bidirectional control: the embeddings and
/// overrides (U+202A-U+202E), the isolates (U+2066-U+2069) and the marks
/// (U+200E, U+200F, U+061C), which reorder what a terminal shows.
pub(crate) fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// `text` as one cell of a Markdown table: control characters escaped as
/// [`shown`] does (a newline cannot end the row) and `|` escaped (it
/// cannot open a cell).
pub(crate) fn markdown_cell(text: &str) -> String {
    shown(text).replace('|', "\\|")
}

fn escape(text: &str, escaped: impl Fn(char) -> bool) -> String {
    if !text.chars().any(|c| is_control(c) && escaped(c)) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if is_control(c) && escaped(c) {
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
        // a right-to-left override is escaped and refused as the others
        assert_eq!(shown("run\u{202e}fdp.exe"), "run\\u{202e}fdp.exe");
        assert!(has_control("a\u{2066}b") && has_control("\u{200f}"));
        assert_eq!(markdown_cell("a|b\nc"), "a\\|b\\nc");
    }
}
