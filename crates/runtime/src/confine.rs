//! What confines a partition's processes besides cgroups: the user they run as and the
//! network namespace they see (DESIGN: "its own uid where configured, optionally its own
//! namespaces"; DriveOS 3.3.2: only the CAN gateway reaches the bus).
//!
//! A [`Confinement`] is prepared before the clone ([`resolve_user`], [`bulkhead_os::netdev::private_netns`])
//! and applied in the child between clone and exec by the one launcher
//! ([`bulkhead_os::launch`], given [`Confinement::launch`]).

use bulkhead_model::types::Sandbox;
use bulkhead_os::harden::Protect;
use std::os::fd::RawFd;

/// How a partition's processes are confined (besides their cgroups).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// uid and gid to run as (supplementary groups are dropped); `None` = unchanged.
    pub identity: Option<(u32, u32)>,
    /// A network namespace to enter (an fd the caller keeps open until the child has
    /// exec'd); `None` = the supervisor's.
    pub netns: Option<RawFd>,
    /// Variables added to the environment.
    pub env: Vec<(String, String)>,
    /// Descriptors the child keeps open across exec, at the same numbers (e.g. its
    /// channels); the caller keeps them open until the child has exec'd. Every other
    /// descriptor of the caller is close-on-exec or closed by the launcher.
    pub pass_fds: Vec<RawFd>,
    /// The parts of the sandbox that apply ([`partition_env`] when `clean_env`, the
    /// others through [`Confinement::launch`]); all by default.
    pub sandbox: Sandbox,
    /// A process of bulkhead's own (a bus's gateway task): it keeps the supervisor's
    /// OOM protection; a partition's program starts with the supervisor's original
    /// score ([`bulkhead_os::oom`]).
    pub bulkhead_own: bool,
    /// `identity` is a uid of its own given to a `user: root` be partition: its
    /// processes are root of a user namespace that maps root to it.
    pub user_namespace: bool,
}

impl Confinement {
    /// What the launcher applies in the child ([`bulkhead_os::launch`]): the user and
    /// network namespace, and of the sandbox what applies: for the process of a be
    /// partition (`be`) all of it, for an rt task `no_new_privs` alone (the model's
    /// `Sandbox`: its other parts are for be partitions only). `clean_env` is applied
    /// by [`partition_env`], `pass_fds` by the launcher's descriptor hand-over.
    pub fn launch(&self, be: bool) -> bulkhead_os::launch::Confine {
        let s = self.sandbox;
        bulkhead_os::launch::Confine {
            identity: self.identity,
            netns: self.netns,
            no_new_privs: s.no_new_privs,
            no_capabilities: be && s.no_capabilities,
            seccomp: be && s.seccomp,
            private_tmp: be && s.private_tmp,
            pid_namespace: be && s.pid_namespace,
            oom_score_adj: (!self.bulkhead_own).then(bulkhead_os::oom::program_score),
            private_users: be && self.user_namespace,
            protect: Protect {
                system: be && s.protect_system,
                kernel: be && s.protect_kernel,
                cgroups: be && s.protect_cgroups,
                runtime_dir: be && s.hide_runtime_dir,
                ipc: be && s.private_ipc,
            },
        }
    }
}

/// The search path of a partition's processes.
pub const PARTITION_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The whole environment of a partition's processes: `PATH` ([`PARTITION_PATH`]),
/// the supervisor's `LANG` if it has one, then `own` (bulkhead's variables for the
/// partition, e.g. its channels), which override those. Nothing else of the
/// supervisor's environment (its `HOME`, `USER`, credentials in variables) reaches a
/// partition, unless `clean` is false (`sandbox: {clean_env: false}`): then the
/// supervisor's whole environment takes the place of `PATH` and `LANG`.
pub fn partition_env(own: &[(String, String)], clean: bool) -> Vec<(String, String)> {
    let mut env = vec![("PATH".to_string(), PARTITION_PATH.to_string())];
    if let Ok(lang) = std::env::var("LANG") {
        env.push(("LANG".to_string(), lang));
    }
    if !clean {
        env = std::env::vars().collect();
    }
    env.retain(|(k, _)| !own.iter().any(|(o, _)| o == k));
    env.extend(own.iter().cloned());
    env
}

pub use bulkhead_model::users::resolve as resolve_user;

#[cfg(test)]
mod tests {
    use super::*;
    use bulkhead_os::launch::{self, Env, Fds, Join, Launch, Program};
    use bulkhead_os::netdev::private_netns;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::path::Path;

    /// A child confined to a private network namespace and uid 65534 (by the launcher,
    /// as an rt task is) sees only `lo` and runs as that uid, without supplementary
    /// groups.
    #[test]
    #[ignore = "needs root: CAP_SYS_ADMIN for namespaces, setuid"]
    fn a_confined_child_has_its_own_network_and_uid() {
        let ns = private_netns().expect("private netns");
        let c = Confinement {
            identity: Some((65534, 65534)),
            netns: Some(ns.as_raw_fd()),
            env: Vec::new(),
            pass_fds: Vec::new(),
            sandbox: Sandbox::default(),
            bulkhead_own: false,
            user_namespace: false,
        };
        let (mut out, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = theirs.as_raw_fd();
        // /proc/net/dev lists the interfaces of the reader's network namespace.
        let script = format!(
            "{{ id -u; id -G; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; }} >&{fd}"
        );
        let argv = ["/bin/sh".to_string(), "-c".to_string(), script];
        let program = Program::new(Path::new("/bin/sh"), &argv, None).unwrap();
        let env = Env::new(partition_env(&[], true));
        let child = launch::spawn(Launch {
            program: &program,
            env: &env,
            join: Join::Stay,
            sched: None,
            confine: c.launch(false),
            fds: Fds {
                keep: &[fd],
                ..Fds::default()
            },
            wait_exec: true,
        })
        .expect("runs");
        drop(theirs);
        let mut text = String::new();
        out.read_to_string(&mut text).unwrap();
        bulkhead_os::proc::wait(child.pid).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, ["65534", "65534", "lo"], "{text}");
    }

    /// bulkhead's variables override the defaults; nothing else of the caller's
    /// environment is kept.
    #[test]
    fn a_partition_environment_is_path_lang_and_its_own_variables() {
        let own = [
            ("BULKHEAD_CHAN_A".to_string(), "fd:4:5".to_string()),
            ("PATH".to_string(), "/opt/bin".to_string()),
        ];
        let env = partition_env(&own, true);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert!(!names.contains(&"HOME"), "{env:?}");
        assert!(env.contains(&own[0]) && env.contains(&own[1]), "{env:?}");
        assert_eq!(names.iter().filter(|&&n| n == "PATH").count(), 1, "{env:?}");
        let lang = std::env::var("LANG").ok();
        assert_eq!(names.contains(&"LANG"), lang.is_some(), "{env:?}");
    }
}
