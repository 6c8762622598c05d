//! `hcbench-fuzz`: runs one fuzz target for N executions and reports what it found.
//!
//! Three kinds of finding, each saved under `fuzz/findings/<target>/`:
//! - a panic (caught with `catch_unwind`; the run goes on): `crash-<hash>.input` and `.txt`
//!   with the message, one input per distinct panic message;
//! - a hang: an execution still running after `--hang-ms` (a watchdog thread);
//! - unbounded allocation: one execution holding more than `--mem-mib` of heap at once (a
//!   counting global allocator).
//!
//! A hang, an allocation over the limit and anything else that aborts the process (a stack
//! overflow) cannot be survived, so the harness keeps the input being run where a SIGABRT
//! handler can reach it without allocating, writes it to `hang.input`, `oom.input` or
//! `abort.input`, and the process ends. `--replay FILE...` runs saved inputs again.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::ffi::CString;
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use arbitrary::Unstructured;
use hcbench_fuzz::mutate::Mutator;
use hcbench_fuzz::structured::Gen;
use hcbench_fuzz::targets::{self, NAMES, Target};

// ---- the counting allocator ------------------------------------------------------------

/// Bytes of heap live now, in every thread.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// `LIVE` when the current execution started.
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Highest `LIVE - BASE` of the current execution.
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Most heap one execution may hold; 0 while no execution runs.
static LIMIT: AtomicUsize = AtomicUsize::new(0);

struct Counting;

impl Counting {
    fn charge(&self, bytes: usize) {
        let live = LIVE.fetch_add(bytes, Relaxed) + bytes;
        let limit = LIMIT.load(Relaxed);
        if limit != 0 {
            let used = live.saturating_sub(BASE.load(Relaxed));
            PEAK.fetch_max(used, Relaxed);
            if used > limit {
                die(Reason::Oom);
            }
        }
    }
}

// SAFETY: every call is forwarded to `System` with the same layout; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.charge(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.charge(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            self.charge(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// ---- findings that end the process -----------------------------------------------------

#[derive(Clone, Copy)]
enum Reason {
    Abort = 0,
    Hang = 1,
    Oom = 2,
}

static REASON: AtomicUsize = AtomicUsize::new(Reason::Abort as usize);
/// The input being run, readable from a signal handler.
static CURRENT_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static CURRENT_LEN: AtomicUsize = AtomicUsize::new(0);
/// Where each reason's input goes, prepared before the first execution.
static DEATH_PATHS: OnceLock<[CString; 3]> = OnceLock::new();
const DEATH_FILES: [&str; 3] = ["abort.input", "hang.input", "oom.input"];
const DEATH_MESSAGES: [&str; 3] = [
    "\nhcbench-fuzz: the process aborted (a stack overflow?); input saved as abort.input\n",
    "\nhcbench-fuzz: HANG: one execution ran past --hang-ms; input saved as hang.input\n",
    "\nhcbench-fuzz: OOM: one execution held more heap than --mem-mib; input saved as oom.input\n",
];

fn die(reason: Reason) -> ! {
    REASON.store(reason as usize, Relaxed);
    // SAFETY: abort takes no arguments; the SIGABRT handler below saves the input.
    unsafe { libc::abort() }
}

/// Writes the current input to its reason's file, with async-signal-safe calls only.
extern "C" fn on_abort(_signal: libc::c_int) {
    let reason = REASON.load(Relaxed).min(2);
    let Some(paths) = DEATH_PATHS.get() else { return };
    let ptr = CURRENT_PTR.load(Relaxed);
    let len = CURRENT_LEN.load(Relaxed);
    // SAFETY: open/write/close are async-signal-safe; `ptr` points at the input of the
    // execution in progress, which the main thread does not touch until it returns.
    unsafe {
        let fd = libc::open(paths[reason].as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644);
        if fd >= 0 {
            if !ptr.is_null() {
                libc::write(fd, ptr as *const libc::c_void, len);
            }
            libc::close(fd);
        }
        let msg = DEATH_MESSAGES[reason];
        libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
    }
}

// ---- the watchdog ----------------------------------------------------------------------

/// Number of the execution running now (0 = none).
static RUNNING: AtomicU64 = AtomicU64::new(0);

fn start_watchdog(hang: Duration) {
    std::thread::spawn(move || {
        let mut seen = 0;
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = RUNNING.load(Relaxed);
            if now != seen {
                seen = now;
                since = Instant::now();
            } else if now != 0 && since.elapsed() > hang {
                die(Reason::Hang);
            }
        }
    });
}

// ---- the run ---------------------------------------------------------------------------

struct Options {
    target: String,
    execs: u64,
    max_time: Option<Duration>,
    seed: u64,
    hang: Duration,
    mem_limit: usize,
    repo: PathBuf,
    findings: Option<PathBuf>,
    replay: Vec<PathBuf>,
}

const USAGE: &str = "usage: hcbench-fuzz TARGET [--execs N] [--max-seconds S] [--seed N] [--hang-ms MS] [--mem-mib MIB] [--repo DIR] [--findings DIR] [--replay FILE...]
targets: reply, trace, bench, models, config, script";

fn parse_args() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let target = args.next().ok_or(USAGE)?;
    if !NAMES.contains(&target.as_str()) {
        return Err(format!("unknown target `{target}`\n{USAGE}"));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("fuzz/ has a parent").to_path_buf();
    let mut o = Options {
        target,
        execs: 10_000_000,
        max_time: None,
        seed: 1,
        hang: Duration::from_secs(2),
        mem_limit: 256 << 20,
        repo,
        findings: None,
        replay: Vec::new(),
    };
    let number = |v: Option<String>, flag: &str| -> Result<u64, String> {
        let v = v.ok_or(format!("{flag} needs a value"))?;
        v.replace('_', "").parse().map_err(|_| format!("{flag}: `{v}` is not a number"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--execs" => o.execs = number(args.next(), "--execs")?,
            "--seed" => o.seed = number(args.next(), "--seed")?,
            "--max-seconds" => o.max_time = Some(Duration::from_secs(number(args.next(), "--max-seconds")?)),
            "--hang-ms" => o.hang = Duration::from_millis(number(args.next(), "--hang-ms")?),
            "--mem-mib" => o.mem_limit = (number(args.next(), "--mem-mib")? as usize) << 20,
            "--repo" => o.repo = args.next().ok_or("--repo needs a value")?.into(),
            "--findings" => o.findings = Some(args.next().ok_or("--findings needs a value")?.into()),
            "--replay" => o.replay.extend(args.by_ref().map(PathBuf::from)),
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    Ok(o)
}

/// The last panic's message and location, set by the panic hook.
static PANIC: Mutex<String> = Mutex::new(String::new());

fn hash(data: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

struct Stats {
    execs: u64,
    crashes: u64,
    corpus: usize,
    slowest: Duration,
    slowest_input: Vec<u8>,
    peak_heap: usize,
}

/// Runs one input under the watchdog and the allocation limit. `Err` holds the panic message.
fn execute(target: &mut dyn Target, input: &[u8], exec: u64, limit: usize, stats: &mut Stats) -> Result<u64, String> {
    CURRENT_PTR.store(input.as_ptr() as *mut u8, Relaxed);
    CURRENT_LEN.store(input.len(), Relaxed);
    BASE.store(LIVE.load(Relaxed), Relaxed);
    PEAK.store(0, Relaxed);
    LIMIT.store(limit, Relaxed);
    RUNNING.store(exec, Relaxed);
    let started = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| target.run(input)));
    let took = started.elapsed();
    RUNNING.store(0, Relaxed);
    LIMIT.store(0, Relaxed);
    stats.peak_heap = stats.peak_heap.max(PEAK.load(Relaxed));
    if took > stats.slowest {
        stats.slowest = took;
        stats.slowest_input = input.to_vec();
    }
    result.map_err(|_| std::mem::take(&mut *PANIC.lock().unwrap_or_else(|e| e.into_inner())))
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    std::process::exit(match run(&o) {
        Ok(0) => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("hcbench-fuzz: {e}");
            2
        }
    });
}

/// Runs the target; returns the number of crashes found.
fn run(o: &Options) -> Result<u64, String> {
    let mut target = targets::by_name(&o.target, &o.repo)
        .map_err(|e| format!("cannot set up target {}: {e}", o.target))?
        .expect("the name was checked");
    let findings = o.findings.clone().unwrap_or_else(|| o.repo.join("fuzz/findings").join(&o.target));
    std::fs::create_dir_all(&findings).map_err(|e| format!("cannot create {}: {e}", findings.display()))?;
    let paths =
        DEATH_FILES.map(|f| CString::new(findings.join(f).into_os_string().into_encoded_bytes()).expect("no NUL"));
    DEATH_PATHS.set(paths).expect("set once");
    // SAFETY: installs a handler that only makes async-signal-safe calls.
    unsafe { libc::signal(libc::SIGABRT, on_abort as *const () as libc::sighandler_t) };
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = format!("panicked at {location}: {payload}");
    }));
    start_watchdog(o.hang);

    let mut stats =
        Stats { execs: 0, crashes: 0, corpus: 0, slowest: Duration::ZERO, slowest_input: Vec::new(), peak_heap: 0 };
    if !o.replay.is_empty() {
        for (i, file) in o.replay.iter().enumerate() {
            let input = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let started = Instant::now();
            match execute(target.as_mut(), &input, i as u64 + 1, o.mem_limit, &mut stats) {
                Ok(_) => println!("{}: ok in {:.1?}", file.display(), started.elapsed()),
                Err(m) => {
                    stats.crashes += 1;
                    println!("{}: CRASH {m}", file.display());
                }
            }
        }
        return Ok(stats.crashes);
    }

    let mut seeds = target.seeds();
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    let (keys, values) = hcbench_fuzz::vocabulary(&seeds);
    let mut dict: Vec<Vec<u8>> = target.dict().into_iter().map(String::into_bytes).collect();
    dict.extend(keys.iter().map(|k| k.clone().into_bytes()));
    dict.extend(values.iter().map(|v| v.clone().into_bytes()));
    let mut all_keys = keys.clone();
    all_keys.extend(target.dict());
    let g = Gen { keys: &all_keys, values: &values };
    let mut mutator = Mutator::new(o.seed, dict, target.max_len());
    let mut rng = fastrand::Rng::with_seed(o.seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut corpus = seeds.clone();
    let mut outcomes = HashSet::new();
    let mut crash_messages = HashSet::new();
    let mut raw = Vec::new();
    const MAX_CORPUS: usize = 20_000;
    const MAX_KEPT_LEN: usize = 8 * 1024;

    println!(
        "{}: {} seeds, {} dictionary tokens, {} executions, hang after {:?}, heap limit {} MiB, findings in {}",
        o.target,
        seeds.len(),
        keys.len() + values.len(),
        o.execs,
        o.hang,
        o.mem_limit >> 20,
        findings.display()
    );
    let started = Instant::now();
    let mut last_report = Instant::now();
    for exec in 1..=o.execs {
        let i = (exec - 1) as usize;
        let input = if i < seeds.len() {
            seeds[i].clone()
        } else if rng.u8(0..4) == 0 && {
            raw.clear();
            raw.extend((0..rng.usize(64..4096)).map(|_| rng.u8(..)));
            true
        } {
            match target.structured(&mut Unstructured::new(&raw), &g) {
                Ok(bytes) => bytes,
                Err(_) => seeds[rng.usize(0..seeds.len())].clone(),
            }
        } else {
            let mut data = corpus[rng.usize(0..corpus.len())].clone();
            let other = &corpus[rng.usize(0..corpus.len())];
            mutator.mutate(&mut data, other);
            data
        };
        match execute(target.as_mut(), &input, exec, o.mem_limit, &mut stats) {
            Ok(signature) => {
                // Short inputs only: a corpus of long ones slows every later execution.
                if outcomes.insert(signature) && corpus.len() < MAX_CORPUS && input.len() <= MAX_KEPT_LEN {
                    corpus.push(input);
                }
            }
            Err(message) => {
                stats.crashes += 1;
                let first_line = message.lines().next().unwrap_or("").to_string();
                if crash_messages.insert(first_line.clone()) {
                    let name = format!("crash-{:016x}", hash(&input));
                    let _ = std::fs::write(findings.join(format!("{name}.input")), &input);
                    let _ = std::fs::write(findings.join(format!("{name}.txt")), &message);
                    println!(
                        "{}: CRASH #{} at exec {exec}: {first_line} (saved {name}.input)",
                        o.target, stats.crashes
                    );
                }
            }
        }
        stats.execs = exec;
        if exec % 1024 == 0 && o.max_time.is_some_and(|m| started.elapsed() > m) {
            println!("{}: stopping at --max-seconds", o.target);
            break;
        }
        if exec % 1024 == 0 && last_report.elapsed() > Duration::from_secs(30) {
            last_report = Instant::now();
            stats.corpus = corpus.len();
            report(&o.target, &stats, started.elapsed(), false);
        }
    }
    stats.corpus = corpus.len();
    report(&o.target, &stats, started.elapsed(), true);
    if stats.slowest > Duration::from_millis(100) {
        let _ = std::fs::write(findings.join("slowest.input"), &stats.slowest_input);
        println!("{}: the slowest input is saved as slowest.input", o.target);
    }
    Ok(stats.crashes)
}

fn report(target: &str, s: &Stats, elapsed: Duration, last: bool) {
    let rate = s.execs as f64 / elapsed.as_secs_f64().max(1e-9);
    println!(
        "{}{target}: {} execs in {:.0} s ({rate:.0}/s), corpus {}, crashes {}, hangs 0, over heap limit 0, slowest exec {:.1?}, peak heap of one exec {:.1} MiB",
        if last { "DONE " } else { "" },
        s.execs,
        elapsed.as_secs_f64(),
        s.corpus,
        s.crashes,
        s.slowest,
        s.peak_heap as f64 / (1 << 20) as f64,
    );
    let _ = std::io::stdout().flush();
}
