//! What mqs-dump prints: errors as one line with the fix and their exit
//! code, documents on stdout (a reader that went away is no error), and a
//! progress bar on terminals.

use std::process::ExitCode;

use crate::error::Error;

/// Reports `e` as one line on stderr and gives its exit code.
pub fn fail(e: impl Into<Error>) -> ExitCode {
    let e = e.into();
    eprintln!("mqs-dump: error: {}", message(&e));
    ExitCode::from(e.exit_code() as u8)
}

/// The error as one line, with the fix where the error alone does not say it.
pub fn message(e: &Error) -> String {
    match e {
        _ if let Some(mqs_core::Error::NoDebugInfo { detail }) = e.core() => format!(
            "{detail}; the MPI library lacks the debug information its message-queue DLL \
             needs: rebuild the MPI with -g (or install its debug-symbol package)"
        ),
        _ if matches!(e.acquire(), Some(mqs_acquire::Error::NotMpi { .. })) => {
            format!("{e}; give the pid of an MPI rank, or pass --dll")
        }
        other => other.to_string(),
    }
    .replace('\n', " ")
}

/// Prints a document on stdout (a newline added if it lacks one); a reader
/// that went away (`| head`) is no error.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.is_empty() && !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// Writes output produced piece by piece (a large dump's JSON or listing)
/// to stdout through one buffer, with the final newline [`emit`] gives.
pub fn emit_with(
    write: impl FnOnce(
        &mut std::io::BufWriter<LastByte<std::io::StdoutLock<'static>>>,
    ) -> std::io::Result<()>,
) {
    use std::io::Write;
    let stdout = LastByte {
        inner: std::io::stdout().lock(),
        last: None,
    };
    // The buffer comes first: serializers write a few bytes at a time.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    // As emit: a closed stdout (a pipe whose reader left) is not an error
    // worth reporting over the dump's own outcome.
    if write(&mut out).is_ok() && out.flush().is_ok() {
        let stdout = out.get_mut();
        if stdout.last.is_some_and(|b| b != b'\n') {
            let _ = stdout.inner.write_all(b"\n");
        }
    }
    let _ = out.flush();
}

/// Remembers the last byte written through it.
#[derive(Debug)]
pub struct LastByte<W: std::io::Write> {
    inner: W,
    last: Option<u8>,
}

impl<W: std::io::Write> std::io::Write for LastByte<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A progress bar on terminals only.
pub fn progress_bar(template: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(bar)
}
