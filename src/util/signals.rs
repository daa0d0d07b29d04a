//! Ctrl-C and SIGTERM: the first one asks the driver to stop after cleaning
//! up (the running job's process group is terminated, the shaped network
//! removed); the driver polls [`interrupted`].

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the handler (once; later calls do nothing).
pub(crate) fn install() {
    let _ = ctrlc::set_handler(|| {
        if !INTERRUPTED.swap(true, Ordering::SeqCst) {
            eprintln!("repro: stopping: terminating the running job and cleaning up");
        }
    });
}

/// Whether a stop was asked for.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Restores SIGPIPE's default action, which Rust's runtime sets to ignore:
/// `repro list | head -1` then ends quietly when `head` closes the pipe,
/// as other Unix tools do, instead of panicking on a failed write.
#[allow(unsafe_code)]
pub(crate) fn default_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler; called once at
    // start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
