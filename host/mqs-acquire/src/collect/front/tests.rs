//! The front end's unit tests: connections refused, turned away or
//! assigned; reports merged or not; and a starter without the extension.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mqs_core::exit_code;
use mqs_core::model::{JobDump, ProcessDump, RankFailure};
use mqs_core::symbols::SymbolIndex;

use super::super::protocol::{
    self, ShareOptions, ToCollector, ToFront, Token, MAX_FRAME, PROTOCOL,
};
use super::begin::{callback_addresses, MAX_CALLBACK_ADDRESSES};
use super::connection::{accept, Registry};
use super::*;

/// An acceptor on loopback with `hosts` to hand out; stops when dropped.
struct Acceptor {
    addr: SocketAddr,
    token: Token,
    registry: Arc<Mutex<Registry>>,
    events: Receiver<Event>,
    stop: Arc<AtomicBool>,
}

impl Acceptor {
    fn start(hosts: &[&str]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let token = Token::new().unwrap();
        let registry = Arc::new(Mutex::new(Registry {
            hosts: hosts.iter().map(|h| (h.to_string(), false)).collect(),
            closed: false,
        }));
        let (tx, events) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (token, registry, stop) = (token.clone(), registry.clone(), stop.clone());
            std::thread::spawn(move || {
                accept(
                    listener,
                    token,
                    registry,
                    tx,
                    stop,
                    Limits::new(Duration::from_secs(5)),
                    Arc::default(),
                )
            });
        }
        Self {
            addr,
            token,
            registry,
            events,
            stop,
        }
    }

    fn hello(&self, token: &str, host: &str) -> (TcpStream, ToCollector) {
        hello(self.addr, token, host)
    }

    fn event(&self) -> Event {
        self.events.recv_timeout(Duration::from_secs(20)).unwrap()
    }
}

fn greet(addr: SocketAddr, token: &str, host: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let hello = ToFront::Hello {
        protocol: PROTOCOL,
        token: token.into(),
        host: host.into(),
        node: None,
        pid: 42,
        listen: None,
    };
    protocol::send(&mut s, &hello).unwrap();
    s
}

fn hello(addr: SocketAddr, token: &str, host: &str) -> (TcpStream, ToCollector) {
    let mut s = greet(addr, token, host);
    let reply = protocol::receive(&mut s, MAX_FRAME).unwrap();
    (s, reply)
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_wrong_token_is_refused_and_reported() {
    let front = Acceptor::start(&["nodea"]);
    let (_s, reply) = front.hello("0123", "nodea");
    assert!(
        matches!(&reply, ToCollector::Refused { reason } if reason == "wrong token"),
        "{reply:?}"
    );
    match front.event() {
        Event::Refused { reason, .. } => {
            assert!(
                reason.starts_with("wrong token (it says it is pid 42"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // The host is still free for the right collector.
    let (addr, token) = (front.addr, front.token.as_str().to_string());
    let waiting = std::thread::spawn(move || hello(addr, &token, "NodeA.cluster"));
    match front.event() {
        Event::Connected { key, commands, .. } => {
            assert_eq!(key, "nodea");
            commands
                .send(Command::Assign(Assignment {
                    members: vec![Member::single(7, 0)],
                    options: ShareOptions::default(),
                    go_timeout: Duration::from_secs(1),
                    discover: None,
                    children: Vec::new(),
                    in_tree: false,
                }))
                .unwrap();
        }
        other => panic!("{other:?}"),
    }
    let (_s, reply) = waiting.join().unwrap();
    match &reply {
        ToCollector::Assignment {
            members,
            go_timeout_ms,
            ..
        } => assert_eq!((members.len(), *go_timeout_ms), (1, 1000)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hosts_without_ranks_get_nothing_and_late_ones_are_turned_away() {
    let front = Acceptor::start(&["nodea", "nodeb"]);
    let token = front.token.as_str().to_string();
    // The starter's own host, say: nothing to do.
    let (_s, reply) = front.hello(&token, "login");
    assert!(
        matches!(&reply, ToCollector::Assignment { members, .. } if members.is_empty()),
        "{reply:?}"
    );
    // A second collector for a host already taken: nothing either.
    let first = greet(front.addr, &token, "nodea");
    assert!(matches!(front.event(), Event::Connected { .. }));
    let (_s, reply) = front.hello(&token, "nodea");
    assert!(
        matches!(&reply, ToCollector::Assignment { members, .. } if members.is_empty()),
        "{reply:?}"
    );
    drop(first);
    // Past the callback time, a host with ranks is told it is too late.
    front.registry.lock().unwrap().closed = true;
    let (_s, reply) = front.hello(&token, "nodeb");
    assert!(
        matches!(&reply, ToCollector::Refused { reason } if reason.contains("too late")),
        "{reply:?}"
    );
}

#[test]
fn strangers_are_cut_short() {
    let front = Acceptor::start(&["nodea"]);
    // A frame far larger than any hello: refused unread.
    let mut s = TcpStream::connect(front.addr).unwrap();
    s.write_all(&(100u32 << 20).to_be_bytes()).unwrap();
    match front.event() {
        Event::Refused { reason, .. } => assert!(reason.contains("at most 65536"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // Another protocol: told so.
    let mut s = TcpStream::connect(front.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let hello = ToFront::Hello {
        protocol: PROTOCOL + 1,
        token: front.token.as_str().into(),
        host: "nodea".into(),
        node: None,
        pid: 1,
        listen: None,
    };
    protocol::send(&mut s, &hello).unwrap();
    let reply: ToCollector = protocol::receive(&mut s, MAX_FRAME).unwrap();
    assert!(
        matches!(&reply, ToCollector::Refused { reason } if reason.contains("same mqs-dump")),
        "{reply:?}"
    );
}

fn host(name: &str, members: &[(i32, i32)]) -> Host {
    Host {
        members: members
            .iter()
            .map(|&(pid, rank)| Member {
                host: name.into(),
                ..Member::single(pid, rank)
            })
            .collect(),
        stage: Stage::Assigned,
        ..Host::new(name)
    }
}

/// What a collector sends for one process.
fn dump(pid: i32, rank: i32) -> Box<ProcessDump> {
    let mut job: JobDump = serde_json::from_str(
        r#"{"schema_version":1,"launcher":null,"failures":[],"processes":[{"pid":0,
        "global_rank":0,"executable":"a","dll":{"path":"d","version":"v",
        "compatibility":2},"communicators":{"status":"ok","list":[]},
        "stats":{"fetches":0,"fetched_bytes":0,"syscalls":0,"elapsed_ms":0.0}}]}"#,
    )
    .unwrap();
    let mut p = job.processes.remove(0);
    p.pid = pid;
    p.global_rank = rank;
    Box::new(p)
}

/// What a collector on a host (by its key) sends about one process.
type Report = (
    &'static str,
    std::result::Result<Box<ProcessDump>, RankFailure>,
);

/// What a collector sends when it could not dump one process.
fn failed(pid: i32, rank: usize) -> RankFailure {
    RankFailure {
        rank,
        pid,
        host: String::new(),
        message: "permission denied".into(),
        exit_code: 4,
    }
}

/// The front end's results after each host reported `reports` and was
/// done, nodea holding ranks 0 (pid 7) and 1 (pid 8), nodeb rank 2
/// (pid 7 there too): (rank, host, what became of it).
fn merged(reports: Vec<Report>) -> Vec<(usize, String, String)> {
    let (_tx, events) = mpsc::channel();
    let hosts = [
        ("nodea".to_string(), host("nodea", &[(7, 0), (8, 1)])),
        ("nodeb".to_string(), host("nodeb", &[(7, 2)])),
    ]
    .into_iter()
    .collect();
    let mut run = Run::idle(events, hosts, Limits::new(Duration::from_secs(1)));
    for (key, report) in reports {
        run.handle(match report {
            Ok(process) => Event::Process {
                key: key.into(),
                process,
            },
            Err(failure) => Event::Failure {
                key: key.into(),
                failure,
            },
        });
    }
    for key in ["nodea", "nodeb"] {
        run.handle(Event::Done { key: key.into() });
    }
    let mut results: Vec<(usize, String, String)> = run
        .results()
        .into_iter()
        .map(|r| match r {
            Ok(p) => (
                p.global_rank as usize,
                p.host.unwrap_or_default(),
                format!("dumped (pid {})", p.pid),
            ),
            Err((f, _)) => (f.rank, f.host, f.message),
        })
        .collect();
    results.sort();
    results
}

/// A report is a member's only if host, pid and rank all are: one
/// differing field, and the member counts as not reported.
#[test]
fn a_report_that_differs_from_a_member_in_one_field_is_not_merged() {
    let not_reported = |rank: usize, pid: i32, host: &str| {
        (
            rank,
            host.to_string(),
            format!(
                "rank {rank} (pid {pid} on host '{host}'): the collector on host '{host}' did \
                 not report it"
            ),
        )
    };
    let none = vec![
        not_reported(0, 7, "nodea"),
        not_reported(1, 8, "nodea"),
        not_reported(2, 7, "nodeb"),
    ];
    let cases: Vec<(&str, Report)> = vec![
        ("pid", ("nodea", Ok(dump(8, 0)))),
        ("rank", ("nodea", Ok(dump(7, 1)))),
        ("rank (not the host's)", ("nodea", Ok(dump(7, 2)))),
        ("host", ("nodeb", Ok(dump(7, 0)))),
        ("pid of a failure", ("nodea", Err(failed(7, 1)))),
        ("rank of a failure", ("nodea", Err(failed(8, 0)))),
        ("host of a failure", ("nodeb", Err(failed(8, 1)))),
    ];
    for (what, report) in cases {
        assert_eq!(merged(vec![report]), none, "a report with another {what}");
    }
    // The same reports with every field right are merged.
    assert_eq!(
        merged(vec![
            ("nodea", Ok(dump(7, 0))),
            ("nodea", Err(failed(8, 1))),
            ("nodeb", Ok(dump(7, 2))),
        ]),
        [
            (0, "nodea".to_string(), "dumped (pid 7)".to_string()),
            (
                1,
                "nodea".to_string(),
                "on host 'nodea': permission denied".to_string()
            ),
            (2, "nodeb".to_string(), "dumped (pid 7)".to_string()),
        ]
    );
}

#[test]
fn every_rank_ends_up_dumped_or_failed_with_its_hosts_reason() {
    let (_tx, events) = mpsc::channel();
    let hosts = [
        ("nodea".to_string(), host("nodea", &[(7, 0), (8, 1)])),
        ("nodeb".to_string(), host("nodeb", &[(7, 2)])),
    ]
    .into_iter()
    .collect();
    let mut run = Run::idle(events, hosts, Limits::new(Duration::from_secs(1)));
    run.handle(Event::Process {
        key: "nodea".into(),
        process: dump(7, 0),
    });
    // Twice, and a rank it was not given: ignored.
    run.handle(Event::Process {
        key: "nodea".into(),
        process: dump(7, 0),
    });
    run.handle(Event::Process {
        key: "nodea".into(),
        process: dump(7, 2),
    });
    run.handle(Event::Failure {
        key: "nodea".into(),
        failure: RankFailure {
            rank: 1,
            pid: 8,
            host: String::new(),
            message: "permission denied for pid 8: no".into(),
            exit_code: 4,
        },
    });
    run.handle(Event::Done {
        key: "nodea".into(),
    });
    run.handle(Event::Lost {
        key: "nodeb".into(),
        reason: "it stopped sending: reset".into(),
    });
    let results = run.results();
    assert_eq!(results.len(), 3);
    let ok: Vec<(i32, Option<&str>)> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|p| (p.global_rank, p.host.as_deref()))
        .collect();
    assert_eq!(ok, [(0, Some("nodea"))]);
    let failed: Vec<(usize, &str, &str, i32)> = results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .map(|(f, _)| (f.rank, f.host.as_str(), f.message.as_str(), f.exit_code))
        .collect();
    assert_eq!(
        failed,
        [
            (
                1,
                "nodea",
                "on host 'nodea': permission denied for pid 8: no",
                4
            ),
            (
                2,
                "nodeb",
                "rank 2 (pid 7 on host 'nodeb'): the collector on host 'nodeb' was lost: \
                 it stopped sending: reset",
                exit_code::COLLECT
            ),
        ]
    );
}

#[test]
fn a_run_of_ranks_counts_as_its_ranks_and_one_not_wholly_asked_for_is_split() {
    let (_tx, events) = mpsc::channel();
    let hosts = [(
        "nodea".to_string(),
        host("nodea", &[(7, 0), (8, 1), (9, 2), (20, 5), (21, 6)]),
    )]
    .into_iter()
    .collect();
    let mut run = Run::idle(events, hosts, Limits::new(Duration::from_secs(1)));
    let run_of = |pid, rank, len| {
        let mut p = dump(pid, rank);
        p.run_len = len;
        Event::Process {
            key: "nodea".into(),
            process: p,
        }
    };
    // Pids 7-9 as ranks 0-2: one result. Pids 20-22 as ranks 5-7:
    // rank 7 was not asked for, so ranks 5 and 6 are taken alone and
    // rank 7 ignored. Rank 1 again (inside a run): ignored.
    run.handle(run_of(7, 0, 3));
    run.handle(run_of(20, 5, 3));
    run.handle(run_of(8, 1, 1));
    run.handle(Event::Done {
        key: "nodea".into(),
    });
    let results = run.results();
    let ok: Vec<(i32, i32, u32)> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|p| (p.pid, p.global_rank, p.run_len))
        .collect();
    assert_eq!(ok, [(7, 0, 3), (20, 5, 1), (21, 6, 1)]);
    assert!(results.iter().all(Result::is_ok), "every rank reported");
}

#[test]
fn collectors_call_back_to_real_interfaces_before_loopback() {
    let addrs = callback_addresses(None, 4000);
    assert!(!addrs.is_empty() && addrs.len() <= MAX_CALLBACK_ADDRESSES);
    assert_eq!(addrs.last().unwrap().to_string(), "127.0.0.1:4000");
    assert!(addrs.iter().all(|a| a.port() == 4000));
    let given: IpAddr = "10.1.2.3".parse().unwrap();
    assert_eq!(
        callback_addresses(Some(given), 5),
        [SocketAddr::new(given, 5)]
    );
}

#[test]
fn a_starter_without_the_extension_fails_each_rank_once_with_the_fix() {
    let mut front = Front::new(&Options::default(), CollectOptions::default());
    let member = |rank: i32, host: &str, pid: i32| Member {
        host: host.into(),
        ..Member::single(pid, rank)
    };
    let members = vec![
        member(0, "nodea", 7),
        member(1, "nodea", 7),
        member(2, "nodeb", 7),
    ];
    assert!(members.iter().all(|m| front.takes(m)));
    assert!(!front.takes(&member(3, "nodeb", 0)), "a rank not started");
    assert!(!front.takes(&member(4, "localhost", 9)), "a local rank");
    let starter = Starter {
        pid: std::process::id() as i32,
        symbols: Arc::new(SymbolIndex::new(Vec::new(), Vec::new()).unwrap()),
    };
    front.start(&starter, members);
    front.stopped();
    let mut failed: Vec<(usize, String)> = front
        .finish()
        .into_iter()
        .map(|r| {
            let (f, _) = r.unwrap_err();
            (f.rank, f.message)
        })
        .collect();
    failed.sort();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(
        failed[0]
            .1
            .contains("rank 0 (pid 7 on host 'nodea'): the starter cannot start collectors"),
        "{}",
        failed[0].1
    );
    assert!(
        failed[0].1.contains("--launcher 'ssh {host}'"),
        "{}",
        failed[0].1
    );
    assert!(
        failed[1].1.contains("has the pid 7 of rank 0 too"),
        "{}",
        failed[1].1
    );
    assert!(failed[2].1.contains("host 'nodeb'"), "{}", failed[2].1);
}

#[test]
fn ranks_without_a_starter_and_no_launcher_fail_each_with_the_reason() {
    let mut front = Front::new(&Options::default(), CollectOptions::default());
    let members = (0..3)
        .map(|rank| Member {
            host: format!("node{rank}"),
            ..Member::single(7, rank)
        })
        .collect();
    front.start_with_launcher(members);
    let failed: Vec<String> = front
        .finish()
        .into_iter()
        .map(|r| r.unwrap_err().0.message)
        .collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|m| m.contains("--launcher starts; none was given")),
        "{failed:?}"
    );
}
