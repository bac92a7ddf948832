//! The library's errors: each becomes the one line the debugger prints.

/// Why a request of the debugger could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Core(#[from] mqs_core::Error),
    #[error("the debugger's request is not valid JSON of its shape: {0}")]
    Request(#[from] serde_json::Error),
    #[error("the debugger's request is not UTF-8 text")]
    Text,
    #[error("no request (NULL)")]
    Null,
    #[error("mqs's host failed inside ({0}); please report it")]
    Panic(String),
}
