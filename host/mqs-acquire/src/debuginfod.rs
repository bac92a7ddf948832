//! A debuginfod client: separate debug files fetched by build-id from the
//! servers in `DEBUGINFOD_URLS` (`GET <server>/buildid/<hex>/debuginfo`,
//! the dwz supplementary file by its own build-id the same way), kept in
//! `~/.cache/mqs/debuginfod/<hex>/debuginfo`.
//!
//! The environment variables are elfutils' own: `DEBUGINFOD_URLS` (servers,
//! separated by spaces), `DEBUGINFOD_TIMEOUT` (seconds without progress
//! before a transfer is given up, default 90), `DEBUGINFOD_MAXTIME` (seconds
//! for one whole transfer, default unlimited here: 600), `DEBUGINFOD_MAXSIZE`
//! (bytes, default 1 GiB). A server that cannot be reached is not asked
//! again in the same run.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mqs_core::hex::hex;
use mqs_core::symbols::DebugFileFetcher;
use mqs_core::sync::lock;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);
const DEFAULT_MAXTIME: Duration = Duration::from_secs(600);
const DEFAULT_MAXSIZE: u64 = 1 << 30;

/// The servers to ask and where to keep what they give.
#[derive(Debug)]
pub struct Debuginfod {
    servers: Vec<String>,
    cache: PathBuf,
    timeout: Duration,
    maxtime: Duration,
    maxsize: u64,
    progress: bool,
    /// Servers that failed at the connection level this run.
    dead: Mutex<HashSet<String>>,
    /// Answers of this run, by build-id (None: no server has it).
    asked: Mutex<HashMap<String, Option<PathBuf>>>,
    notes: Mutex<Vec<String>>,
}

impl Debuginfod {
    /// A client for the servers in `DEBUGINFOD_URLS`, caching under mqs's
    /// cache directory, as a fetcher of debug files for symbol lookups; None
    /// when no server is configured.
    pub fn from_environment(progress: bool) -> Option<Arc<dyn DebugFileFetcher>> {
        let root = mqs_core::cache_dir::cache_root()?;
        Some(Arc::new(Self::from_env(&root, progress)?))
    }

    /// A client for the servers in `DEBUGINFOD_URLS`, caching under
    /// `cache_root/debuginfod`; None when no server is configured.
    pub fn from_env(cache_root: &Path, progress: bool) -> Option<Self> {
        let urls = std::env::var("DEBUGINFOD_URLS").ok()?;
        let seconds = |var: &str| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|&s| s > 0)
                .map(Duration::from_secs)
        };
        Some(Self::new(
            urls.split_whitespace().map(str::to_owned).collect(),
            cache_root.join("debuginfod"),
            seconds("DEBUGINFOD_TIMEOUT").unwrap_or(DEFAULT_TIMEOUT),
            seconds("DEBUGINFOD_MAXTIME").unwrap_or(DEFAULT_MAXTIME),
            std::env::var("DEBUGINFOD_MAXSIZE")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_MAXSIZE),
            progress,
        ))
        .filter(|d| !d.servers.is_empty())
    }

    pub fn new(
        servers: Vec<String>,
        cache: PathBuf,
        timeout: Duration,
        maxtime: Duration,
        maxsize: u64,
        progress: bool,
    ) -> Self {
        Self {
            servers: servers
                .into_iter()
                .map(|s| s.trim_end_matches('/').to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            cache,
            timeout,
            maxtime,
            maxsize,
            progress,
            dead: Mutex::new(HashSet::new()),
            asked: Mutex::new(HashMap::new()),
            notes: Mutex::new(Vec::new()),
        }
    }

    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// What went wrong with the servers so far, one line each.
    pub fn notes(&self) -> Vec<String> {
        lock(&self.notes).clone()
    }

    /// The debug file with this build-id: from the cache, else from the
    /// first server that has it. `what` names it in the progress bar.
    pub fn debuginfo(&self, build_id: &[u8], what: &str) -> Option<PathBuf> {
        let id = hex(build_id);
        if id.len() < 4 {
            return None;
        }
        if let Some(answer) = lock(&self.asked).get(&id) {
            return answer.clone();
        }
        let dir = self.cache.join(&id);
        let cached = dir.join("debuginfo");
        let answer = if cached.is_file() {
            Some(cached)
        } else {
            self.servers
                .iter()
                .find_map(|server| self.fetch(server, &id, &dir, what))
        };
        lock(&self.asked).insert(id, answer.clone());
        answer
    }

    fn note(&self, line: String) {
        lock(&self.notes).push(line);
    }

    fn fetch(&self, server: &str, id: &str, dir: &Path, what: &str) -> Option<PathBuf> {
        if lock(&self.dead).contains(server) {
            return None;
        }
        let url = format!("{server}/buildid/{id}/debuginfo");
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(self.timeout.min(Duration::from_secs(30))))
            .timeout_recv_response(Some(self.timeout))
            .timeout_recv_body(Some(self.maxtime))
            .timeout_global(Some(self.maxtime))
            .build();
        let agent = ureq::Agent::new_with_config(config);
        let response = match agent.get(&url).call() {
            Ok(r) => r,
            Err(e) => {
                self.note(format!("debuginfod {server}: {e}"));
                lock(&self.dead).insert(server.to_owned());
                return None;
            }
        };
        let status = response.status().as_u16();
        if status == 404 {
            return None;
        }
        if status != 200 {
            self.note(format!("debuginfod {url}: HTTP {status}"));
            return None;
        }
        let length = response.body().content_length();
        if length.is_some_and(|n| n > self.maxsize) {
            self.note(format!(
                "debuginfod {url}: {} bytes is more than DEBUGINFOD_MAXSIZE",
                length.unwrap_or(0)
            ));
            return None;
        }
        if let Err(e) = std::fs::create_dir_all(dir) {
            self.note(format!("{}: {e}", dir.display()));
            return None;
        }
        let partial = dir.join(format!(".debuginfo.{}.partial", std::process::id()));
        let reader = response
            .into_body()
            .into_with_config()
            .limit(self.maxsize)
            .reader();
        let bar = self.progress_bar(what, id, length);
        let copied = copy_with_progress(reader, &partial, &bar);
        if let Some(bar) = &bar {
            bar.finish_and_clear();
        }
        match copied {
            Ok(_) => {}
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                self.note(format!("debuginfod {url}: {e}"));
                return None;
            }
        }
        let done = dir.join("debuginfo");
        if let Err(e) = std::fs::rename(&partial, &done) {
            let _ = std::fs::remove_file(&partial);
            self.note(format!("{}: {e}", done.display()));
            return None;
        }
        Some(done)
    }

    fn progress_bar(
        &self,
        what: &str,
        id: &str,
        length: Option<u64>,
    ) -> Option<indicatif::ProgressBar> {
        use std::io::IsTerminal;
        if !self.progress || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::new(length.unwrap_or(0));
        let template = "debuginfod: {msg} {bar:30} {bytes}/{total_bytes} ({elapsed})";
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(format!("{what} ({})", &id[..id.len().min(12)]));
        Some(bar)
    }
}

fn copy_with_progress(
    mut reader: impl Read,
    to: &Path,
    bar: &Option<indicatif::ProgressBar>,
) -> std::io::Result<u64> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(to)?);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        total += n as u64;
        if let Some(bar) = bar {
            bar.set_position(total);
        }
    }
    out.flush()?;
    Ok(total)
}

impl DebugFileFetcher for Debuginfod {
    fn debuginfo(&self, build_id: &[u8], what: &str) -> Option<PathBuf> {
        Debuginfod::debuginfo(self, build_id, what)
    }
    fn servers(&self) -> Vec<String> {
        self.servers.clone()
    }
    fn notes(&self) -> Vec<String> {
        Debuginfod::notes(self)
    }
}
