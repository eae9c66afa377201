//! Retry throttling (gRFC A6, `retryThrottling`): a token count per server name, in integer
//! thousandths of a token as C-core and grpc-java keep it, so that a `tokenRatio` of 0.1 adds
//! exactly 100 and ten successes exactly one token (grpc-go's `float64` would drift).
//!
//! - Every failed attempt whose status is retryable (or non-fatal, for hedging), or whose
//!   pushback says not to retry, takes 1 token (the count never goes below 0).
//! - Every successful call gives `tokenRatio` (the count never goes above `maxTokens`).
//! - Retries and hedges are sent only while the count is above `maxTokens / 2`: after a
//!   failure, the retry is allowed if the count *after* taking the token is still above it.
//!
//! So with `maxTokens 10, tokenRatio 0.1`, 20 calls that always fail with a retryable code and
//! `maxAttempts 4` make 23 attempts: the first call 4 (the count goes 10 → 9, 8, 7, 6; a retry
//! after each of the first three), then every call 1 (6 → 5 is not above 5, and the count only
//! falls). [`RetryThrottle`]'s tests check that sum, and the interop tests check that `grpcio`
//! makes the same 23.

use crate::RetryThrottling;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The token count of one server name. Share one per target ([`ThrottleRegistry`]): A6
/// throttles "per server name", across every method and every channel to it.
///
/// ```
/// use retry_grpc::{RetryThrottle, RetryThrottling};
///
/// let throttle = RetryThrottle::new(RetryThrottling::new(10, 0.1)?);
/// assert!(throttle.record_failure()); // 9 tokens: a retry may be sent
/// for _ in 0..3 {
///     throttle.record_failure(); // 8, 7, 6
/// }
/// assert!(!throttle.record_failure()); // 5 is not above 10 / 2: no retry
/// assert_eq!(throttle.milli_tokens(), 5_000);
/// for _ in 0..10 {
///     throttle.record_success(); // +0.1 each, exactly
/// }
/// assert_eq!(throttle.milli_tokens(), 6_000);
/// assert!(throttle.allows_retry());
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct RetryThrottle {
    config: RetryThrottling,
    max_milli: u32,
    ratio_milli: u32,
    milli_tokens: AtomicU32,
}

impl RetryThrottle {
    /// A full bucket: `maxTokens` tokens.
    pub fn new(config: RetryThrottling) -> Self {
        let max_milli = config.max_tokens() * 1000;
        Self::with_milli_tokens(config, max_milli)
    }

    fn with_milli_tokens(config: RetryThrottling, milli_tokens: u32) -> Self {
        RetryThrottle {
            config,
            max_milli: config.max_tokens() * 1000,
            ratio_milli: config.token_ratio_milli(),
            milli_tokens: AtomicU32::new(milli_tokens),
        }
    }

    /// The configuration.
    pub fn config(&self) -> RetryThrottling {
        self.config
    }

    /// The count, in thousandths of a token.
    pub fn milli_tokens(&self) -> u32 {
        self.milli_tokens.load(Ordering::Acquire)
    }

    /// `maxTokens / 2` in thousandths: retries need a count above it.
    pub fn threshold_milli(&self) -> u32 {
        self.max_milli / 2
    }

    /// Whether a retry or hedge may be sent now (the count is above the threshold); a hedge
    /// asks this before it is sent.
    pub fn allows_retry(&self) -> bool {
        self.milli_tokens() > self.threshold_milli()
    }

    /// A failed attempt that counts (retryable or non-fatal code, or a pushback that says not
    /// to retry): takes one token, and says whether a retry is still allowed.
    pub fn record_failure(&self) -> bool {
        let previous = self
            .milli_tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tokens| {
                Some(tokens.saturating_sub(1000))
            })
            .unwrap_or_else(|tokens| tokens);
        previous.saturating_sub(1000) > self.threshold_milli()
    }

    /// A successful call: gives `tokenRatio`, up to `maxTokens`.
    pub fn record_success(&self) {
        let max = self.max_milli;
        let ratio = self.ratio_milli;
        let _ = self
            .milli_tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tokens| {
                Some(tokens.saturating_add(ratio).min(max))
            });
    }
}

/// The throttles of a process, one per server name, as C-core's `ServerRetryThrottleMap`.
///
/// When a target's config changes (another `maxTokens` or `tokenRatio`), the new throttle
/// starts with the same fraction of its tokens as the old one had, as C-core does, so that a
/// client that was throttled stays throttled.
///
/// ```
/// use retry_grpc::{RetryThrottling, ThrottleRegistry};
/// use std::sync::Arc;
///
/// let registry = ThrottleRegistry::new();
/// let config = RetryThrottling::new(10, 0.1)?;
/// let a = registry.get("dns:///orders.internal:443", config);
/// let b = registry.get("dns:///orders.internal:443", config);
/// assert!(Arc::ptr_eq(&a, &b)); // one count per server name
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Debug, Default)]
pub struct ThrottleRegistry {
    throttles: Mutex<HashMap<String, Arc<RetryThrottle>>>,
}

impl ThrottleRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's registry, for channels that do not bring their own.
    pub fn global() -> &'static ThrottleRegistry {
        static GLOBAL: OnceLock<ThrottleRegistry> = OnceLock::new();
        GLOBAL.get_or_init(ThrottleRegistry::new)
    }

    /// The throttle of `target` with `config`: the existing one if its config is the same, else
    /// a new one, scaled from the old one's fraction of tokens.
    pub fn get(&self, target: &str, config: RetryThrottling) -> Arc<RetryThrottle> {
        // A panic while holding the lock cannot leave the map inconsistent (each operation is a
        // single insert or read), so a poisoned lock is used as is.
        let mut throttles = self
            .throttles
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(existing) = throttles.get(target) {
            if existing.config() == config {
                return Arc::clone(existing);
            }
        }
        let throttle = match throttles.get(target) {
            Some(old) => {
                let fraction = f64::from(old.milli_tokens()) / f64::from(old.max_milli.max(1));
                let max = f64::from(config.max_tokens() * 1000);
                // In [0, max]: a fraction of a u32.
                Arc::new(RetryThrottle::with_milli_tokens(
                    config,
                    (fraction * max) as u32,
                ))
            }
            None => Arc::new(RetryThrottle::new(config)),
        };
        throttles.insert(target.to_owned(), Arc::clone(&throttle));
        throttle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(max: u32, ratio: f64) -> RetryThrottle {
        RetryThrottle::new(RetryThrottling::new(max, ratio).expect("valid"))
    }

    /// Attempts made by `calls` calls that always fail with a retryable code, `max_attempts`
    /// each, as the retry decision makes them (a failure is recorded for every attempt, and a
    /// retry follows only if the throttle allows it and attempts remain).
    fn attempts_of_failing_calls(throttle: &RetryThrottle, calls: u32, max_attempts: u32) -> u32 {
        let mut attempts = 0;
        for _ in 0..calls {
            for attempt in 1..=max_attempts {
                attempts += 1;
                let allowed = throttle.record_failure();
                if !allowed || attempt == max_attempts {
                    break;
                }
            }
        }
        attempts
    }

    #[test]
    fn twenty_failing_calls_make_a6s_count_of_attempts() {
        assert_eq!(attempts_of_failing_calls(&throttle(10, 0.1), 20, 4), 23);
        assert_eq!(attempts_of_failing_calls(&throttle(10, 0.1), 20, 5), 24);
        // Two attempts per call: the first two calls take 9, 8 and 7, 6; then one each.
        assert_eq!(attempts_of_failing_calls(&throttle(10, 0.1), 20, 2), 22);
        // maxTokens 100: twelve calls of 4 attempts (48 tokens), the 13th stops at its second
        // (51, then 50, not above 50), and the last 7 make one each.
        assert_eq!(
            attempts_of_failing_calls(&throttle(100, 0.1), 20, 4),
            48 + 2 + 7
        );
    }

    #[test]
    fn the_count_stays_between_zero_and_max() {
        let t = throttle(3, 0.5);
        for _ in 0..10 {
            t.record_failure();
        }
        assert_eq!(t.milli_tokens(), 0);
        for _ in 0..100 {
            t.record_success();
        }
        assert_eq!(t.milli_tokens(), 3_000);
    }

    #[test]
    fn ratios_are_exact_in_thousandths() {
        let t = throttle(10, 0.1);
        for _ in 0..10 {
            t.record_failure();
        }
        assert_eq!(t.milli_tokens(), 0);
        for _ in 0..51 {
            t.record_success();
        }
        // 51 × 0.1 = 5.1 exactly: above the threshold 5.
        assert_eq!(t.milli_tokens(), 5_100);
        assert!(t.allows_retry());
        assert!(!t.record_failure());
    }

    #[test]
    fn odd_max_tokens_threshold() {
        // maxTokens 1: threshold 0.5; one failure leaves 0.
        let t = throttle(1, 1.0);
        assert!(!t.record_failure());
        t.record_success();
        assert_eq!(t.milli_tokens(), 1_000);
        assert!(t.allows_retry());
    }

    #[test]
    fn a_changed_config_keeps_the_fraction() {
        let registry = ThrottleRegistry::new();
        let old = registry.get("a", RetryThrottling::new(10, 0.1).expect("valid"));
        for _ in 0..6 {
            old.record_failure();
        }
        let new = registry.get("a", RetryThrottling::new(100, 0.1).expect("valid"));
        assert!(!Arc::ptr_eq(&old, &new));
        assert_eq!(new.milli_tokens(), 40_000);
        let other = registry.get("b", RetryThrottling::new(10, 0.1).expect("valid"));
        assert_eq!(other.milli_tokens(), 10_000);
    }
}
