//! Which host a name from a job's tables means: this machine (by any of its
//! names), or another one, matched by its short name.

/// Whether a host name from the table is this machine: empty, `localhost`
/// (or `localhost.localdomain`), a loopback address, or this host's own
/// name, short or qualified.
pub fn is_local_host(host: &str) -> bool {
    let host = host.trim();
    if host.is_empty()
        || host == "localhost"
        || host.starts_with("localhost.")
        || host.starts_with("127.")
        || host == "::1"
    {
        return true;
    }
    let ours = local_host_name();
    let short = |h: &str| h.split('.').next().unwrap_or("").to_string();
    ours != "localhost" && short(&ours) == short(host)
}

/// The name a host is matched by: its short name, in lower case; this
/// machine's own name for any name of this machine.
pub fn host_key(host: &str) -> String {
    let name = if is_local_host(host) {
        local_host_name()
    } else {
        host.to_string()
    };
    name.split('.').next().unwrap_or("").to_ascii_lowercase()
}

pub fn local_host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_by_short_name_and_this_machine_by_any_of_its_names() {
        assert_eq!(host_key("NodeA.cluster.example"), "nodea");
        let here = host_key(&local_host_name());
        assert_eq!(host_key("localhost"), here);
        assert_eq!(host_key("127.0.0.1"), here);
        assert_eq!(host_key(""), here);
    }
}
