//! The longitudinal controller service as a program (`bulkhead-app long-controller`),
//! driven over its four channels (DriveOS Table 2, channels 5-8) as the ADAS mapper
//! drives it, without `bulkhead run`: the channels are named shared memory and the
//! task's control block is made with the task library's supervisor side, as any
//! supervisor would. Checks from outside what docs/vehicle.md promises: UPDATE before
//! INIT and malformed commands are refused, counted (`rejected`) and not acted on (no
//! output, the integrator untouched), and RESET clears the integrator (the first
//! output after it is the first output after INIT again).

use bulkhead_apps::longcontrol::{Input, Params};
use bulkhead_apps::wire::{Command, InitRecord, Op, ResetRecord, UpdateInput, UpdateOutput, SIZE};
use bulkhead_chan::{Channel, Receiver, Sender, Spec};
use bulkhead_task::clock::now_ns;
use bulkhead_task::link::{LinkSpec, TaskLink};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

const CHANNELS: [&str; 4] = [
    "long_control_command",
    "long_control_data",
    "long_update_input",
    "long_update_output",
];

/// The program and its channels; dropping it stops the program and removes them.
struct Service {
    child: Child,
    link: TaskLink,
    channels: Vec<Channel>,
    cmd: Sender,
    data: Sender,
    input: Sender,
    output: Receiver,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.link.request_stop();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for c in self.channels.drain(..) {
            let _ = c.destroy();
        }
    }
}

fn start() -> Service {
    let mut channels = Vec::new();
    let mut env = Vec::new();
    for name in CHANNELS {
        let shm = format!("bht{}-{name}", std::process::id());
        channels.push(Channel::create_named(&Spec::fifo(&shm, SIZE as u32, 10)).unwrap());
        env.push((bulkhead_chan::env_var(name), shm));
    }
    let link = TaskLink::create(&LinkSpec {
        name: "long_controller".into(),
        task_index: 0,
        budget_ns: 50_000,
        period_ns: 1_000_000,
        deadline_ns: 1_000_000,
        epoch_ns: now_ns() + 50_000_000,
        ring_depth: 1024,
    })
    .unwrap();
    let mut cmd = Process::new(env!("CARGO_BIN_EXE_bulkhead-app"));
    cmd.arg("long-controller")
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    link.prepare(&mut cmd);
    let child = cmd.spawn().unwrap();
    let tx = |k: usize| {
        let mut s = channels[k].sender().unwrap();
        s.set_spin(0);
        s
    };
    let (cmd, data, input) = (tx(0), tx(1), tx(2));
    let output = channels[3].receiver().unwrap();
    Service {
        child,
        link,
        channels,
        cmd,
        data,
        input,
        output,
    }
}

impl Service {
    fn counter(&self, name: &str) -> u64 {
        self.link
            .named_counters()
            .into_iter()
            .find(|c| c.0 == name)
            .map_or(0, |c| c.1)
    }

    /// Waits until counter `name` reaches `value` (the program handles commands once
    /// per 1 ms job).
    fn wait_counter(&self, name: &str, value: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.counter(name) < value {
            assert!(
                Instant::now() < deadline,
                "{name} stayed at {} (want {value}); counters {:?}",
                self.counter(name),
                self.link.named_counters()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(self.counter(name), value, "{name}");
    }

    fn send(&mut self, cmd: [u8; SIZE]) {
        self.cmd
            .write_timeout(&cmd, Duration::from_secs(2))
            .unwrap();
    }

    fn init(&mut self, seq: u64) {
        let records = InitRecord::all(&Params::rav4(), seq);
        for r in &records {
            self.data.write_timeout(r, Duration::from_secs(2)).unwrap();
        }
        let n = records.len() as u32;
        self.send(
            Command {
                seq,
                op: Op::Init { records: n },
            }
            .encode(),
        );
    }

    fn reset(&mut self, seq: u64, corrupt: bool) {
        self.data
            .write_timeout(&ResetRecord::encode(seq), Duration::from_secs(2))
            .unwrap();
        let mut cmd = Command { seq, op: Op::Reset }.encode();
        if corrupt {
            cmd[0] ^= 0xFF; // the magic
        }
        self.send(cmd);
    }

    /// Sends UPDATE `seq` (20 m/s, target 20.5 m/s: unsaturated) with `op` as the command's op word.
    fn update_op(&mut self, seq: u64, op: u32) {
        let input = Input {
            v_ego: 20.0,
            v_target: 20.5,
            active: true,
            ..Input::default()
        };
        let msg = UpdateInput {
            seq,
            sent_ns: seq * 10,
            input,
            tag: seq as u8,
        };
        self.input
            .write_timeout(&msg.encode(), Duration::from_secs(2))
            .unwrap();
        let mut cmd = Command {
            seq,
            op: Op::Update,
        }
        .encode();
        cmd[4..8].copy_from_slice(&op.to_le_bytes());
        self.send(cmd);
    }

    /// UPDATE `seq` and its output.
    fn update(&mut self, seq: u64) -> UpdateOutput {
        self.update_op(seq, 3);
        let mut m = [0u8; SIZE];
        self.output
            .read_timeout(&mut m, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("no output for UPDATE {seq}: {e}"));
        UpdateOutput::decode(&m)
    }
}

#[test]
fn malformed_commands_are_refused_counted_and_reset_clears_the_integrator() {
    let mut s = start();
    // UPDATE before INIT: refused, no output.
    s.update_op(1, 3);
    s.wait_counter("rejected", 1);
    s.init(2);
    s.wait_counter("inits", 1);
    let first = s.update(3);
    assert_eq!((first.seq, first.sent_ns, first.tag), (3, 30, 3));
    assert!(first.out.i > 0.0, "{first:?}");
    let mut last = first;
    for seq in 4..30 {
        last = s.update(seq);
        assert_eq!(
            last.seq, seq,
            "outputs in order, none for a refused command"
        );
    }
    let wound = last.out.i;
    assert!(
        wound > 20.0 * first.out.i,
        "{wound} after 27 updates, {} after 1",
        first.out.i
    );

    // A RESET with a bad magic and an UPDATE with an unknown op: refused, counted,
    // no output; the integrator keeps integrating.
    s.reset(30, true);
    s.wait_counter("rejected", 2);
    s.update_op(31, 9);
    s.wait_counter("rejected", 3);
    let next = s.update(32);
    assert_eq!(next.seq, 32, "no output for the refused UPDATE 31");
    assert!(
        next.out.i > wound,
        "{} after the refused RESET, {wound} before",
        next.out.i
    );
    assert_eq!(s.counter("resets"), 0);

    // RESET: the integrator is cleared; the next output is the one after INIT.
    s.reset(33, false);
    s.wait_counter("resets", 1);
    let after = s.update(34);
    assert_eq!(after.out, first.out);
    // The output is written before the counter is published: wait for it.
    s.wait_counter("updates", 29);
    assert_eq!(s.counter("rejected"), 3);
}
