//! The admission gate's rows, not built yet (issue 27, item 2): the modes each simulation keeps a
//! slot for, so that a gate row is one function and one `match` arm away.
//!
//! Every simulation with a gate slot (`amplification`, `collapse`, `storm`, the long outage of
//! `--bin storm`) has a strategy `Gate(mode)` whose call returns `None` until its annotated
//! function is written; the binaries skip a strategy that returns `None` and say so in one line.
//! To add a mode to a simulation: write its `#[retry(..., gate = ...)]` function beside the others
//! (the gate shared as the simulation shares a budget: per client in `amplification`, one per run
//! in `collapse`), and make the `Gate(mode)` arm call it. Its row then appears in the table, the
//! CSV and the pictures, and `bench/tests` pins nothing for it until its numbers are known.

/// A mode of the admission gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateMode {
    /// Client-side adaptive throttling (Google SRE book, "Handling Overload"): reject locally
    /// with probability `max(0, (requests − K·accepts) / (requests + 1))`, K = 2.
    Throttling,
    /// The AWS SDKs' adaptive mode: the CUBIC client rate limiter.
    Cubic,
    /// Adaptive concurrency, AIMD (×0.9 on a drop, +1 otherwise).
    Aimd,
    /// Adaptive concurrency, Netflix's Gradient2.
    Gradient2,
}

impl GateMode {
    /// Every mode, in the order of the tables.
    pub const ALL: [GateMode; 4] = [
        GateMode::Throttling,
        GateMode::Cubic,
        GateMode::Aimd,
        GateMode::Gradient2,
    ];

    /// The row's name.
    pub fn name(self) -> &'static str {
        match self {
            GateMode::Throttling => "gate: adaptive throttling",
            GateMode::Cubic => "gate: CUBIC rate",
            GateMode::Aimd => "gate: AIMD concurrency",
            GateMode::Gradient2 => "gate: Gradient2 concurrency",
        }
    }
}

/// A simulation's strategies with the gate's slots among them: what a runner and a binary need
/// to list them, run the built ones and name the others.
pub trait Slots: Copy + 'static {
    /// The strategies other than the gate's, in the order of the tables.
    const BASE: &'static [Self];

    /// The slot of gate mode `mode`.
    fn gate(mode: GateMode) -> Self;

    /// The gate mode of a gate's strategy; `None` for the others.
    fn mode(self) -> Option<GateMode>;

    /// Whether a run of it can be made: `false` for a gate mode whose function is not written
    /// yet (the place to say `true` once it is).
    fn is_built(self) -> bool;

    /// [`BASE`](Slots::BASE), then the gate's slots.
    fn with_gates() -> Vec<Self> {
        Self::BASE
            .iter()
            .copied()
            .chain(GateMode::ALL.map(Self::gate))
            .collect()
    }

    /// The line a binary prints for the gate's slots not built yet, if any.
    fn pending() -> Option<String> {
        let missing: Vec<&str> = Self::with_gates()
            .into_iter()
            .filter(|s| !s.is_built())
            .filter_map(Self::mode)
            .map(GateMode::name)
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "not built yet (issue 27, item 2), so no row: {}",
                missing.join(", ")
            )
        })
    }
}
