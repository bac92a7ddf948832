//! Where mqs keeps what it fetches or is given between runs (type packs a
//! user adds, debuginfod's downloads).

/// mqs's cache directory: `$MQS_CACHE`, else `$XDG_CACHE_HOME/mqs`, else
/// `~/.cache/mqs` (where the type packs a user adds and debuginfod's
/// downloads go).
pub fn cache_root() -> Option<std::path::PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = var("MQS_CACHE") {
        return Some(dir.into());
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Some(std::path::PathBuf::from(dir).join("mqs"));
    }
    var("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/mqs"))
}
