//! Where the network commands go: the system (`ip`, `tc`, `ethtool` as
//! argument vectors, never a shell) or a dry run that records them.

use std::process::Command;
use std::sync::Mutex;

use super::NetError;

/// An argument vector from string slices.
pub(crate) fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_string()).collect()
}

/// Runs one command given as an argument vector.
pub(crate) trait Exec: Send + Sync {
    /// Runs `argv`; its standard output when it succeeds.
    fn run(&self, argv: &[String]) -> Result<String, NetError>;

    /// Records this process as the owner of the names of `tag`
    /// ([`super::owner::claim`]); `Ok(false)` when another record is
    /// there. A dry run claims every tag and records nothing.
    fn claim(&self, tag: &str) -> Result<bool, NetError> {
        super::owner::claim(tag)
    }

    /// Removes this process's owner record of `tag`.
    fn release(&self, tag: &str) {
        super::owner::release(tag);
    }
}

/// Runs commands on this host.
#[derive(Debug, Default)]
pub(crate) struct System;

impl Exec for System {
    fn run(&self, argv: &[String]) -> Result<String, NetError> {
        let (program, args) = argv.split_first().ok_or_else(|| NetError::Start {
            program: String::new(),
            source: std::io::Error::other("empty command"),
        })?;
        let out = Command::new(program)
            .args(args)
            .output()
            .map_err(|source| NetError::Start {
                program: program.clone(),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(NetError::Failed {
                command: argv.join(" "),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }
}

/// What a dry run answers to a command, given the commands before it.
type Reply = Box<dyn Fn(&[String], &[Vec<String>]) -> String + Send + Sync>;

/// Records every command and answers each with `reply(argv)` (empty output
/// by default): the whole shaping pipeline, testable without root.
pub(crate) struct DryRun {
    log: Mutex<Vec<Vec<String>>>,
    reply: Reply,
}

impl std::fmt::Debug for DryRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DryRun").field("log", &self.log).finish()
    }
}

impl Default for DryRun {
    fn default() -> Self {
        Self::answering(|_| String::new())
    }
}

impl DryRun {
    /// A dry run whose commands print `reply(argv)`.
    pub(crate) fn answering(reply: impl Fn(&[String]) -> String + Send + Sync + 'static) -> Self {
        Self {
            log: Mutex::new(Vec::new()),
            reply: Box::new(move |argv, _| reply(argv)),
        }
    }

    /// The dry run of `repro run --dry-run`: a minimal model of the kernel
    /// and the nodes, so the real setup code runs unchanged. A route reads
    /// back as the last `route replace` in its namespace set it, every node
    /// says it has netem, and every other command prints nothing.
    pub(crate) fn planning() -> Self {
        Self {
            log: Mutex::new(Vec::new()),
            reply: Box::new(|argv, before| {
                let words: Vec<&str> = argv.iter().map(String::as_str).collect();
                if let ["ip", "-n", ns, "route", "show", ..] = words[..] {
                    return before
                        .iter()
                        .rev()
                        .find_map(
                            |c| match c.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                                ["ip", "-n", n, "route", "replace", ..] if n == ns => {
                                    Some(c[5..].join(" ") + "\n")
                                }
                                _ => None,
                            },
                        )
                        .unwrap_or_default();
                }
                if words.windows(2).any(|w| w == ["node", "probe"]) {
                    return "netem: yes\n".into();
                }
                String::new()
            }),
        }
    }

    /// The commands since the last call, each as one line.
    pub(crate) fn take(&self) -> Vec<String> {
        self.log
            .lock()
            .map(|mut l| l.drain(..).map(|a| a.join(" ")).collect())
            .unwrap_or_default()
    }

    /// The commands so far, each as one line.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn commands(&self) -> Vec<String> {
        self.log
            .lock()
            .map(|l| l.iter().map(|a| a.join(" ")).collect())
            .unwrap_or_default()
    }
}

impl Exec for DryRun {
    fn run(&self, argv: &[String]) -> Result<String, NetError> {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let reply = (self.reply)(argv, &log);
        log.push(argv.to_vec());
        Ok(reply)
    }

    fn claim(&self, _tag: &str) -> Result<bool, NetError> {
        Ok(true)
    }

    fn release(&self, _tag: &str) {}
}

impl<E: Exec + ?Sized> Exec for std::sync::Arc<E> {
    fn run(&self, argv: &[String]) -> Result<String, NetError> {
        (**self).run(argv)
    }

    fn claim(&self, tag: &str) -> Result<bool, NetError> {
        (**self).claim(tag)
    }

    fn release(&self, tag: &str) {
        (**self).release(tag);
    }
}
