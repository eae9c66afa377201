//! One retrying layer: an annotated function called inside the attempt of another that
//! retries makes a single attempt, unless it says `nested = retry`; `scope::caller_retries`
//! and the `Retry-Attempt` header carry the same rule across a process boundary.
//!
//! The design notes' case: a portal retrying 4 times (max = 3) a service that tries its
//! database 3 times (max = 2) makes 4 × 3 = 12 database calls out of one request. With one
//! retrying layer it makes 4.

use crate::common::MS;
use retry_runtime::scope::{self, AttemptHeader};
use retry_runtime::{attempt, retry, testing};
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

/// A database that always times out, and the attempt number each call saw.
#[derive(Default)]
struct Database {
    calls: AtomicU32,
    attempts: Mutex<Vec<u32>>,
}

impl Database {
    fn query(&self) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.attempts
            .lock()
            .expect("not poisoned")
            .push(attempt().number());
        Err(io::ErrorKind::TimedOut.into())
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    fn attempts(&self) -> Vec<u32> {
        self.attempts.lock().expect("not poisoned").clone()
    }
}

fn ms(pauses: &[u64]) -> Vec<Duration> {
    pauses.iter().map(|&n| Duration::from_millis(n)).collect()
}

// ---- sync -------------------------------------------------------------------------------

#[retry(max = 2, base = "1ms", jitter = none)]
fn query(db: &Database) -> io::Result<()> {
    db.query()
}

#[retry(max = 2, base = "1ms", jitter = none, nested = retry)]
fn query_retrying(db: &Database) -> io::Result<()> {
    db.query()
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn portal(db: &Database) -> io::Result<()> {
    query(db)
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn portal_over_retrying(db: &Database) -> io::Result<()> {
    query_retrying(db)
}

#[retry(max = 0, base = "1ms", jitter = none)]
fn portal_once(db: &Database) -> io::Result<()> {
    query(db)
}

#[test]
fn the_four_by_three_case_makes_four_database_calls_by_default() {
    let db = Database::default();
    let (result, pauses) = testing::record(|| portal(&db));
    assert!(result.is_err());
    assert_eq!(db.calls(), 4);
    // Only the portal paused; the database query made one attempt each time.
    assert_eq!(pauses, ms(&[1, 2, 4]));
    assert_eq!(db.attempts(), [1, 1, 1, 1]);
}

#[test]
fn nested_retry_restores_the_twelve() {
    let db = Database::default();
    let (result, pauses) = testing::record(|| portal_over_retrying(&db));
    assert!(result.is_err());
    assert_eq!(db.calls(), 12);
    // Per portal attempt the query pauses 1, 2 ms; between them the portal 1, 2, 4 ms.
    assert_eq!(pauses, ms(&[1, 2, 1, 1, 2, 2, 1, 2, 4, 1, 2]));
    assert_eq!(db.attempts(), [1, 2, 3].repeat(4));
}

#[test]
fn alone_or_after_a_retrying_caller_returned_the_inner_function_retries() {
    let db = Database::default();
    let _ = testing::record(|| query(&db));
    assert_eq!(db.calls(), 3);
    // The portal's context is gone once it returns.
    let _ = testing::record(|| portal(&db));
    let _ = testing::record(|| query(&db));
    assert_eq!(db.calls(), 3 + 4 + 3);
}

#[test]
fn an_outer_function_with_max_0_does_not_suppress_the_inner_retries() {
    let db = Database::default();
    let (result, pauses) = testing::record(|| portal_once(&db));
    assert!(result.is_err());
    assert_eq!(db.calls(), 3);
    assert_eq!(pauses, ms(&[1, 2]));
}

// ---- three levels -----------------------------------------------------------------------

type Read = fn(&Database) -> io::Result<()>;
type Service = fn(Read, &Database) -> io::Result<()>;

#[retry(max = 1, base = "1ms", jitter = none)]
fn read_row(db: &Database) -> io::Result<()> {
    db.query()
}

#[retry(max = 1, base = "1ms", jitter = none, nested = retry)]
fn read_row_retrying(db: &Database) -> io::Result<()> {
    db.query()
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn service(read: Read, db: &Database) -> io::Result<()> {
    read(db)
}

#[retry(max = 2, base = "1ms", jitter = none, nested = retry)]
fn service_retrying(read: Read, db: &Database) -> io::Result<()> {
    read(db)
}

#[retry(max = 0, base = "1ms", jitter = none)]
fn service_once(read: Read, db: &Database) -> io::Result<()> {
    read(db)
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn gateway(service: Service, read: Read, db: &Database) -> io::Result<()> {
    service(read, db)
}

fn gateway_calls(service: Service, read: Read) -> u32 {
    let db = Database::default();
    let (result, _) = testing::record(|| gateway(service, read, &db));
    assert!(result.is_err());
    db.calls()
}

#[test]
fn three_levels_deep_only_the_layers_that_say_nested_retry_multiply() {
    // gateway (4 attempts) → service (3) → read_row (2)
    assert_eq!(gateway_calls(service, read_row), 4);
    assert_eq!(gateway_calls(service, read_row_retrying), 4 * 2);
    assert_eq!(gateway_calls(service_retrying, read_row), 4 * 3);
    assert_eq!(
        gateway_calls(service_retrying, read_row_retrying),
        4 * 3 * 2
    );
    // A middle layer that makes one attempt does not hide the gateway's retries from the
    // bottom one.
    assert_eq!(gateway_calls(service_once, read_row), 4);
    assert_eq!(gateway_calls(service_once, read_row_retrying), 4 * 2);

    // Without the gateway: the service is the outermost retrying layer.
    let db = Database::default();
    let _ = testing::record(|| service(read_row, &db));
    assert_eq!(db.calls(), 3);
    let db = Database::default();
    let _ = testing::record(|| service_once(read_row, &db));
    assert_eq!(db.calls(), 2);
}

// ---- async, current thread --------------------------------------------------------------

#[retry(max = 2, base = "1ms", jitter = none)]
async fn query_async(db: &Database) -> io::Result<()> {
    tokio::time::sleep(MS).await;
    db.query()
}

#[retry(max = 2, base = "1ms", jitter = none, nested = retry)]
async fn query_async_retrying(db: &Database) -> io::Result<()> {
    tokio::time::sleep(MS).await;
    db.query()
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn portal_async(db: &Database) -> io::Result<()> {
    // Suspended before the inner call: the context must be back when the task resumes.
    tokio::task::yield_now().await;
    tokio::time::sleep(MS).await;
    query_async(db).await
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn portal_async_over_retrying(db: &Database) -> io::Result<()> {
    tokio::task::yield_now().await;
    tokio::time::sleep(MS).await;
    query_async_retrying(db).await
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn portal_async_over_sync(db: &Database) -> io::Result<()> {
    tokio::time::sleep(MS).await;
    query(db)
}

#[retry(max = 0, base = "1ms", jitter = none)]
async fn portal_async_once(db: &Database) -> io::Result<()> {
    tokio::time::sleep(MS).await;
    query_async(db).await
}

#[tokio::test(start_paused = true)]
async fn async_across_await_four_by_default_and_twelve_with_nested_retry() {
    let db = Database::default();
    let t0 = tokio::time::Instant::now();
    assert!(portal_async(&db).await.is_err());
    assert_eq!(db.calls(), 4);
    assert_eq!(db.attempts(), [1, 1, 1, 1]);
    // 4 attempts of 2 ms each, and the portal's pauses.
    assert_eq!(t0.elapsed(), 4 * 2 * MS + (1 + 2 + 4) * MS);

    let db = Database::default();
    let t0 = tokio::time::Instant::now();
    assert!(portal_async_over_retrying(&db).await.is_err());
    assert_eq!(db.calls(), 12);
    assert_eq!(db.attempts(), [1, 2, 3].repeat(4));
    // Per portal attempt: 1 ms, then 3 queries of 1 ms with pauses of 1 and 2 ms.
    assert_eq!(
        t0.elapsed(),
        4 * (MS + 3 * MS + (1 + 2) * MS) + (1 + 2 + 4) * MS
    );
}

#[tokio::test(start_paused = true)]
async fn a_sync_function_inside_an_async_attempt_is_nested_too() {
    let db = Database::default();
    assert!(portal_async_over_sync(&db).await.is_err());
    assert_eq!(db.calls(), 4);
}

#[tokio::test(start_paused = true)]
async fn an_async_outer_function_with_max_0_does_not_suppress_the_inner_retries() {
    let db = Database::default();
    assert!(portal_async_once(&db).await.is_err());
    assert_eq!(db.calls(), 3);
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn portal_spawning(db: &Arc<Database>, same_layer: bool) -> io::Result<()> {
    let db = Arc::clone(db);
    let query = async move { query_async(&db).await };
    let task = if same_layer {
        tokio::spawn(scope::caller_retries_async(query))
    } else {
        tokio::spawn(query)
    };
    task.await.expect("no panic")
}

#[tokio::test(start_paused = true)]
async fn a_task_spawned_from_an_attempt_is_its_own_layer_unless_wrapped_in_caller_retries() {
    // The context follows the task, not what it spawns: 4 × 3.
    let db = Arc::new(Database::default());
    assert!(portal_spawning(&db, false).await.is_err());
    assert_eq!(db.calls(), 12);

    // `caller_retries_async` around the spawned work makes it one layer again.
    let db = Arc::new(Database::default());
    assert!(portal_spawning(&db, true).await.is_err());
    assert_eq!(db.calls(), 4);
}

// ---- async, multi-thread ----------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none)]
async fn portal_hopping(db: &Database) -> io::Result<()> {
    // Give the scheduler every chance to move this task to another worker mid-attempt.
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    query_async(db).await
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn portal_hopping_over_retrying(db: &Database) -> io::Result<()> {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    query_async_retrying(db).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_multi_thread_runtime_the_context_follows_each_task() {
    // 48 spawned tasks on 4 workers, interleaved: portals (4 database calls each), portals
    // over `nested = retry` (12 each), and bare queries (3 each) that must not see any
    // portal's context, though they run on the same threads.
    const TASKS: usize = 48;
    let dbs: Vec<Arc<Database>> = (0..TASKS).map(|_| Arc::default()).collect();
    let tasks: Vec<_> = dbs
        .iter()
        .enumerate()
        .map(|(i, db)| {
            let db = Arc::clone(db);
            tokio::spawn(async move {
                let _ = match i % 3 {
                    0 => portal_hopping(&db).await,
                    1 => portal_hopping_over_retrying(&db).await,
                    _ => query_async(&db).await,
                };
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("no panic");
    }
    for (i, db) in dbs.iter().enumerate() {
        let expected = [4, 12, 3][i % 3];
        assert_eq!(db.calls(), expected, "task {i}");
    }
}

// ---- scope::caller_retries ----------------------------------------------------------------

#[test]
fn caller_retries_makes_annotated_functions_inside_single_attempt() {
    let db = Database::default();
    let (result, pauses) = testing::record(|| scope::caller_retries(|| query(&db)));
    assert!(result.is_err());
    assert_eq!(db.calls(), 1);
    assert!(pauses.is_empty());

    // Unless they say `nested = retry`.
    let db = Database::default();
    let _ = testing::record(|| scope::caller_retries(|| query_retrying(&db)));
    assert_eq!(db.calls(), 3);

    // And only inside: afterwards the same function retries again.
    let db = Database::default();
    let _ = testing::record(|| query(&db));
    assert_eq!(db.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn caller_retries_async_makes_awaited_annotated_functions_single_attempt() {
    let db = Database::default();
    let t0 = tokio::time::Instant::now();
    assert!(scope::caller_retries_async(query_async(&db)).await.is_err());
    assert_eq!(db.calls(), 1);
    assert_eq!(t0.elapsed(), MS);

    // Across awaits inside the scope, several calls, one attempt each.
    let db = Database::default();
    let _ = scope::caller_retries_async(async {
        let _ = query_async(&db).await;
        tokio::task::yield_now().await;
        let _ = query_async(&db).await;
        let _ = query_async_retrying(&db).await;
    })
    .await;
    assert_eq!(db.calls(), 1 + 1 + 3);

    let db = Database::default();
    assert!(query_async(&db).await.is_err());
    assert_eq!(db.calls(), 3);
}

// ---- the attempt header, across a process boundary --------------------------------------

/// A request to the service: its attempt header (if the client sent one) and where to answer.
struct Request {
    header: Option<(&'static str, String)>,
    reply: mpsc::Sender<io::Result<()>>,
}

/// The service, on its own thread (so no context of the client's reaches it except the
/// header): reads the header and, when the caller retries, queries with a single attempt.
fn serve(expects: AttemptHeader, requests: mpsc::Receiver<Request>, db: &Database) -> Vec<u32> {
    let mut seen = Vec::new();
    for request in requests {
        let value = request
            .header
            .as_ref()
            .filter(|(name, _)| *name == expects.name())
            .map(|(_, value)| value.as_str());
        seen.extend(value.and_then(|v| expects.parse(v)));
        let result = if expects.caller_retries(value) {
            testing::record(|| scope::caller_retries(|| query(db))).0
        } else {
            testing::record(|| query(db)).0
        };
        let _ = request.reply.send(result);
    }
    seen
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn client(service: &mpsc::Sender<Request>, header: Option<AttemptHeader>) -> io::Result<()> {
    let (reply, answer) = mpsc::channel();
    let header = header.map(|h| h.for_current_attempt());
    service
        .send(Request { header, reply })
        .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
    answer
        .recv()
        .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?
}

/// One client call against a fresh service: the database calls and the attempt numbers the
/// service read.
fn round_trip(sent: Option<AttemptHeader>, expects: AttemptHeader) -> (u32, Vec<u32>) {
    let db = Database::default();
    let seen = thread::scope(|s| {
        let (requests, incoming) = mpsc::channel();
        let server = s.spawn(|| serve(expects, incoming, &db));
        let (result, pauses) = testing::record(|| client(&requests, sent));
        assert!(result.is_err());
        assert_eq!(pauses, ms(&[1, 2, 4]));
        drop(requests);
        server.join().expect("no panic")
    });
    (db.calls(), seen)
}

#[test]
fn attempt_header_round_trip_keeps_one_retrying_layer_across_processes() {
    // Outside an annotated function, a plain call is a first attempt.
    let (name, value) = AttemptHeader::DEFAULT.for_current_attempt();
    assert_eq!((name, value.as_str()), ("Retry-Attempt", "1"));

    // The client writes its attempt number; the service parses 1, 2, 3, 4 and leaves the
    // retrying to it: 4 database calls.
    let header = AttemptHeader::DEFAULT;
    assert_eq!(round_trip(Some(header), header), (4, vec![1, 2, 3, 4]));

    // A configurable name, on both sides.
    let custom = AttemptHeader::named("X-Retry-Attempt");
    assert_eq!(round_trip(Some(custom), custom), (4, vec![1, 2, 3, 4]));

    // Without the header (or under a name the service does not read), both layers retry:
    // 4 × 3 = 12.
    assert_eq!(round_trip(None, header), (12, vec![]));
    assert_eq!(round_trip(Some(custom), header), (12, vec![]));
}

// ---- the debug event of a loop that declines ------------------------------------------------

mod log {
    use std::fmt;
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    /// Every event as `LEVEL function: message`.
    #[derive(Clone, Default)]
    pub struct Capture(Arc<Mutex<Vec<String>>>);

    impl Capture {
        pub fn lines(&self) -> Vec<String> {
            self.0.lock().expect("not poisoned").clone()
        }
    }

    #[derive(Default)]
    struct Fields {
        function: String,
        message: String,
    }

    impl Visit for Fields {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "function" {
                self.function = value.to_owned();
            }
        }

        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            if field.name() == "message" {
                self.message = format!("{value:?}");
            }
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }

        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }

        fn record(&self, _: &Id, _: &Record<'_>) {}

        fn record_follows_from(&self, _: &Id, _: &Id) {}

        fn event(&self, event: &Event<'_>) {
            let mut fields = Fields::default();
            event.record(&mut fields);
            let line = format!(
                "{} {}: {}",
                event.metadata().level(),
                fields.function,
                fields.message
            );
            self.0.lock().expect("not poisoned").push(line);
        }

        fn enter(&self, _: &Id) {}

        fn exit(&self, _: &Id) {}
    }
}

use crate::common::callsites;

fn logged(f: impl FnOnce()) -> Vec<String> {
    callsites::keep_open();
    let capture = log::Capture::default();
    tracing::subscriber::with_default(capture.clone(), || testing::record(f));
    capture.lines()
}

#[test]
fn a_nested_loop_that_declines_says_so_at_debug() {
    let db = Database::default();
    let lines = logged(|| {
        let _ = portal(&db);
    });
    let declined = "DEBUG query: not retrying: a layer above retries this work \
                    (write `nested = retry` to retry here too)";
    let retrying = "INFO portal: attempt failed; retrying";
    let gave_up = "ERROR portal: giving up";
    let expected: Vec<&str> = [declined, retrying]
        .repeat(3)
        .into_iter()
        .chain([declined, gave_up])
        .collect();
    assert_eq!(lines, expected);

    // With `nested = retry` the inner loop retries (and logs as a loop of its own), and
    // nothing is declined.
    let db = Database::default();
    let lines = logged(|| {
        let _ = portal_over_retrying(&db);
    });
    assert!(lines.iter().all(|line| !line.starts_with("DEBUG")));
    let count = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(count("INFO query_retrying"), 4 * 2);
    assert_eq!(count("ERROR query_retrying: giving up"), 4);
    assert_eq!(count("INFO portal_over_retrying"), 3);
    assert_eq!(count("ERROR portal_over_retrying: giving up"), 1);
}
