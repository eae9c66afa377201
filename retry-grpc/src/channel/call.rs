//! One call through the door: its deadline, then its attempts as its method's policy says, run
//! by the engine with the door's decider ([`decide`](super::decide)): retries in
//! [`engine::drive`], hedged copies in [`engine::drive_hedged`]; or one attempt (with its
//! transparent retries) when the method has no policy.

use super::attempt::{self, Failed, Request0, Transparent};
use super::body::{Accounting, Answer, RequestBody};
use super::decide::{self, Failure, Hedging, Retrying, Transparently};
use super::{BoxError, GrpcRetryLayer};
use crate::{CallPolicy, HedgingCall, HedgingPolicy, RetryCall, RetryPolicy};
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use retry_runtime::Policy;
use retry_runtime::Verdict;
use retry_runtime::engine::{self, DynHooks, Event, HookFuture, Operation, Settings, TokioTimer};
use retry_runtime::named::Named;
use retry_runtime::{GiveUp, RetryEvent};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

/// The door's answer: tonic's body, whatever the channel's is.
type Answered = Result<Response<tonic::body::Body>, BoxError>;

pub(crate) async fn respond<S, RB>(
    layer: Arc<GrpcRetryLayer>,
    mut service: S,
    request: Request<tonic::body::Body>,
) -> Answered
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>> + Clone + Send,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    let counters = &*layer.counters;
    engine::report(layer.name, Event::Call, counters);
    let (parts, body) = request.into_parts();
    let method = layer.config.method_config(parts.uri.path());
    // The method's `timeout`, or the caller's own deadline if it is sooner.
    let asked = parts
        .headers
        .get(attempt::GRPC_TIMEOUT)
        .and_then(attempt::parse_timeout);
    let timeout = match (method.and_then(|m| m.timeout()), asked) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let deadline = timeout.map(|t| Instant::now() + t);
    let body = RequestBody::new(body, layer.buffer_limit);
    let request = Request0 {
        parts: &parts,
        body: &body,
        deadline,
        wait_for_ready: method.and_then(|m| m.wait_for_ready()).unwrap_or(false),
        counters,
        name: layer.name,
    };
    // The named policy of the call, held for all its attempts and copies.
    let named = layer.lookup.as_ref().and_then(|lookup| lookup());
    let named = named.as_deref();
    let run = async {
        match method.and_then(|m| m.policy()) {
            Some(CallPolicy::Retry(policy)) => {
                retry(&layer, named, &mut service, &request, policy).await
            }
            Some(CallPolicy::Hedging(policy)) => {
                hedge(&layer, named, service, &request, policy).await
            }
            None => alone(&layer, &mut service, &request).await,
        }
    };
    let Some(at) = deadline else {
        return run.await;
    };
    match tokio::time::timeout_at(at, run).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(error)) if Instant::now() < at => Err(error),
        // An attempt that failed at the deadline (`attempt::send_once`) ends the call as the door's
        // own timer would have: its timer may fire in the same tick as the channel's, and be
        // polled after it, or the task may run only once the server's answer to the deadline
        // is in.
        Ok(Err(_)) | Err(_) => {
            let timeout = timeout.unwrap_or_default();
            request.report(Event::DeadlineExceeded { timeout });
            Err(Box::new(Status::deadline_exceeded(format!(
                "retry-grpc: the call's deadline of {timeout:?} passed"
            ))))
        }
    }
}

/// The caller's answer from a committed answer: its body wrapped (the trailers' status to
/// `accounting`, the deadline), or as it came when there is nothing to read in it.
fn committed<RB>(
    response: Response<RB>,
    accounting: Accounting,
    deadline: Option<Instant>,
) -> Answered
where
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    if matches!(accounting, Accounting::None) && deadline.is_none() {
        return Ok(response.map(tonic::body::Body::new));
    }
    Ok(response.map(|body| tonic::body::Body::new(Answer::new(body, accounting, deadline))))
}

fn finish_failed<RB>(failed: Failed<RB>) -> Answered
where
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    match failed {
        Failed::Answer(response) => Ok(response.map(tonic::body::Body::new)),
        Failed::Error(error) => Err(error),
    }
}

/// The engine's policy for the door's calls: with a decider, its `max` and pauses are never
/// read (the decider holds `maxAttempts` and the pauses), and it has no deadline (the door's
/// own bounds the call: `timeout_at` in [`respond`]).
static DECIDED: Policy = Policy::new();

/// The settings of a call: the layer's name, budget and breaker on the engine's loop (the named
/// policy's budget and breaker where it has them), and its `Counters` as the sink that hears
/// the loop's events (each retry, each hedged copy).
fn settings<'a>(layer: &'a GrpcRetryLayer, named: Option<&'a Named>) -> Settings<'a> {
    let budget = named.and_then(Named::get_budget);
    let breaker = named.and_then(Named::get_breaker);
    Settings::new(&DECIDED)
        .name(layer.name)
        .budget(budget.or(layer.budget.as_deref()))
        .breaker(breaker.or(layer.breaker.as_deref()))
        .sink(&*layer.counters)
}

/// The caller's answer from the engine's outcome: a committed answer with its body wrapped, a
/// failing answer as it came, or the loop's error.
fn answer<RB>(
    outcome: Result<Response<RB>, Failure<RB>>,
    accounting: Accounting,
    deadline: Option<Instant>,
) -> Answered
where
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    match outcome {
        Ok(response) => committed(response, accounting, deadline),
        Err(Failure::Status(_, failed)) => finish_failed(failed),
        Err(Failure::Unsent(_, _, error)) => Err(error),
        Err(Failure::Elapsed(elapsed)) => Err(Box::new(elapsed)),
        Err(Failure::Open(open)) => Err(Box::new(open)),
    }
}

/// The layer's async hooks as the engine calls them (with the outcome, which they do not
/// read): each is only given to the engine if the layer has it.
#[allow(clippy::type_complexity)]
fn hooks<RB>(
    layer: &GrpcRetryLayer,
) -> (
    impl Fn(Result<&Response<RB>, &Failure<RB>>, &RetryEvent) -> HookFuture<'static> + Sync + '_,
    impl Fn(Result<&Response<RB>, &Failure<RB>>, &GiveUp) -> HookFuture<'static> + Sync + '_,
) {
    let notify = |_: Result<&Response<RB>, &Failure<RB>>, event: &RetryEvent| match &layer.notify {
        Some(f) => f(event),
        None => Box::pin(std::future::ready(())),
    };
    let give_up = |_: Result<&Response<RB>, &Failure<RB>>, why: &GiveUp| match &layer.on_give_up {
        Some(f) => f(why),
        None => Box::pin(std::future::ready(())),
    };
    (notify, give_up)
}

/// A call without a policy: one attempt, whose transparent retries alone the engine runs
/// ([`Next::Resend`](engine::Next::Resend), as [`Transparently`] decides: no
/// `grpc-previous-rpc-attempts`, not counted). The layer's budget and breaker are not this
/// loop's; a caller's own retrying layer above does not make it single.
async fn alone<S, RB>(layer: &GrpcRetryLayer, service: &mut S, request: &Request0<'_>) -> Answered
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    let settings = Settings::new(&DECIDED)
        .name(layer.name)
        .sink(&*layer.counters)
        .nested_retry(true);
    // Every failure is the answer unless the decider sends the attempt again.
    let classify = |_: &Failure<RB>| Verdict::Fail;
    let mut decider = Transparently(Transparent::new(request));
    let hooks = DynHooks::new(&classify).decide(&mut decider);
    let attempts = Attempts {
        service,
        ready: true,
        request,
    };
    let outcome = engine::drive(&settings, hooks, TokioTimer, attempts).await;
    answer(outcome, Accounting::None, request.deadline)
}

/// A call under a retry policy: the engine runs the loop, [`Retrying`] decides (A6's
/// [`RetryCall`](crate::RetryCall)), and each attempt is one [`Attempts::attempt`].
async fn retry<S, RB>(
    layer: &GrpcRetryLayer,
    named: Option<&Named>,
    service: &mut S,
    request: &Request0<'_>,
    policy: &RetryPolicy,
) -> Answered
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    let codes = policy.retryable_status_codes();
    let classify = move |failure: &Failure<RB>| decide::kind(failure, codes);
    let mut decider = Retrying {
        call: RetryCall::new(policy, layer.jitter, layer.throttle.clone()),
        request,
        transparent: Transparent::new(request),
    };
    let attempts = Attempts {
        service,
        ready: true,
        request,
    };
    let (notify, give_up) = hooks(layer);
    let hooks = DynHooks::new(&classify)
        .decide(&mut decider)
        .notify_async(layer.notify.is_some().then_some(&notify as _))
        .on_give_up_async(layer.on_give_up.is_some().then_some(&give_up as _));
    let outcome = engine::drive(&settings(layer, named), hooks, TokioTimer, attempts).await;
    // The committed answer's trailers go to the same decision (C-core's `ShouldRetry` for a
    // committed call: the throttle counts its success or failure).
    let accounting = if layer.throttle.is_some() {
        Accounting::Retry(decider.call)
    } else {
        Accounting::None
    };
    answer(outcome, accounting, request.deadline)
}

/// The engine's operation under a retry policy (and without one): each attempt sends the request once, with
/// `grpc-previous-rpc-attempts` from the engine's attempt number (which a transparent retry,
/// [`Next::Resend`](engine::Next::Resend), keeps); a committed answer is the attempt's `Ok`, a
/// status or an error that says it never reached the server its `Err`.
struct Attempts<'a, S> {
    service: &'a mut S,
    ready: bool,
    request: &'a Request0<'a>,
}

impl<S, RB> Operation<Response<RB>, Failure<RB>> for Attempts<'_, S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
{
    fn attempt(&mut self) -> impl Future<Output = Result<Response<RB>, Failure<RB>>> {
        // A6: the attempts before this one, transparent retries not counted.
        let previous = retry_runtime::attempt().number().saturating_sub(1);
        let previous = (previous > 0).then_some(previous);
        attempt::send_once(self.service, &mut self.ready, self.request, previous)
    }
}

/// A call under a hedging policy: the engine runs the copies
/// ([`drive_hedged`](engine::drive_hedged)) on [`HedgingCall::hedge`]'s schedule, under the
/// layer's budget and breaker, and [`Hedging`] says when the next copy goes after one fails (at
/// once after a non-fatal status, after a pushback's pause, never once throttled), or that a
/// copy that never reached the server goes again (its transparent retry). The first
/// copy that commits or ends with a fatal status is the call's; the others are dropped (their
/// HTTP/2 streams reset).
async fn hedge<S, RB>(
    layer: &GrpcRetryLayer,
    named: Option<&Named>,
    service: S,
    request: &Request0<'_>,
    policy: &HedgingPolicy,
) -> Answered
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>> + Clone + Send,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    let codes = policy.non_fatal_status_codes();
    let classify = move |failure: &Failure<RB>| decide::hedged_kind(failure, codes);
    let call = HedgingCall::new(policy, layer.throttle.clone());
    let schedule = call.hedge();
    let mut decider = Hedging {
        call,
        request,
        transparent: Transparent::new(request),
    };
    // The first copy sends on the service that was polled ready, each other one on a clone of
    // it, polled ready first. In a `Mutex` only to be `Sync`: the engine makes the copies
    // through a shared reference, and a tower service need not be `Sync` (tower's
    // `BoxCloneService` is not); each lock is one clone.
    let service = Mutex::new(service);
    let copy = || {
        let hedge = retry_runtime::attempt().hedge();
        let (mut service, mut ready) = {
            let mut service = service
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let clone = service.clone();
            match hedge {
                0 => (std::mem::replace(&mut *service, clone), true),
                _ => (clone, false),
            }
        };
        // A6 numbers the first attempt copy 1: hedge `k` is copy `k + 1`, and carries `k`.
        let previous = (hedge > 0).then_some(u32::from(hedge));
        async move { attempt::send_once(&mut service, &mut ready, request, previous).await }
    };
    let (notify, give_up) = hooks(layer);
    let hooks = DynHooks::new(&classify)
        .decide(&mut decider)
        .notify_async(layer.notify.is_some().then_some(&notify as _))
        .on_give_up_async(layer.on_give_up.is_some().then_some(&give_up as _));
    let settings = settings(layer, named).hedge(Some(&schedule));
    let outcome = engine::drive_hedged(&settings, hooks, TokioTimer, copy).await;
    let accounting = match &layer.throttle {
        Some(throttle) => Accounting::Hedge(Arc::clone(throttle), codes),
        None => Accounting::None,
    };
    answer(outcome, accounting, request.deadline)
}
