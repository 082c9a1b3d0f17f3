//! The words of overhead calibration during a timed session: `Marker` words in a range of their
//! own, which every analysis but the time analysis ignores as it ignores any marker.
//!
//! - A **probe** word is what the calibration probe writes where a real call writes its `Call`
//!   and `Return`: the same push, so that the probe costs what a call costs, but no frame.
//! - A **calibration** word carries one probe's result, measured on the thread that writes it,
//!   in its ring, while the program runs: what a timed and an untimed call cost their caller
//!   and the part of a timed call inside its own interval, each in 1/8 clock ticks (16 bits,
//!   saturating at about 8,000 ticks).
//!
//! ```text
//!  63  60 59        48 47          32 31          16 15           0
//! +------+------------+--------------+--------------+--------------+
//! |  6   | 0xCA1      | timed (1/8)  | untimed (1/8)| inside (1/8) |   calibration
//! |  6   | 0xCA0      | 0                                          |   probe
//! +------+------------+--------------------------------------------+
//! ```

use super::{Event, PAYLOAD_MASK, TAG_MARKER, TAG_SHIFT};

/// The marker values' top 12 bits (of 60) of a calibration word.
const CALIBRATION_MARK: u64 = 0xCA1;
/// The same for a probe word.
const PROBE_MARK: u64 = 0xCA0;
const MARK_SHIFT: u32 = 48;
/// Fixed point of the three costs: 1/8 tick.
const UNITS_PER_TICK: f64 = 8.0;
const FIELD_MAX: u64 = 0xFFFF;

/// One probe's result, in clock ticks per call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CallCosts {
    /// What a timed instrumented call adds to its caller's time.
    pub timed: f64,
    /// What an untimed one adds.
    pub untimed: f64,
    /// The part of a timed call inside its own interval.
    pub inside: f64,
}

fn field(ticks: f64) -> u64 {
    // Negative (a noisy difference) is 0; NaN is 0 too (`as` saturates and maps NaN to 0).
    ((ticks * UNITS_PER_TICK).round() as u64).min(FIELD_MAX)
}

impl Event {
    /// The probe's stand-in for a `Call` or `Return` word.
    #[inline(always)]
    pub const fn probe() -> Event {
        Event(TAG_MARKER << TAG_SHIFT | PROBE_MARK << MARK_SHIFT)
    }

    /// A calibration result (see the module docs); costs below 0 are 0, above about 8,000
    /// ticks saturate.
    pub fn calibration(c: CallCosts) -> Event {
        Event(
            TAG_MARKER << TAG_SHIFT
                | CALIBRATION_MARK << MARK_SHIFT
                | field(c.timed) << 32
                | field(c.untimed) << 16
                | field(c.inside),
        )
    }
}

/// The costs a calibration word carries, or `None` for any other word.
pub fn as_calibration(word: u64) -> Option<CallCosts> {
    if word >> TAG_SHIFT != TAG_MARKER {
        return None;
    }
    let p = word & PAYLOAD_MASK;
    if p >> MARK_SHIFT != CALIBRATION_MARK {
        return None;
    }
    let get = |shift: u32| ((p >> shift) & FIELD_MAX) as f64 / UNITS_PER_TICK;
    Some(CallCosts {
        timed: get(32),
        untimed: get(16),
        inside: get(0),
    })
}

/// Whether `word` is a probe word.
pub fn is_probe(word: u64) -> bool {
    word == Event::probe().word()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_words_round_trip_in_eighths_of_a_tick() {
        let c = CallCosts {
            timed: 101.25,
            untimed: 23.5,
            inside: 47.125,
        };
        assert_eq!(as_calibration(Event::calibration(c).word()), Some(c));
        let clipped = as_calibration(
            Event::calibration(CallCosts {
                timed: 1e9,
                untimed: -3.0,
                inside: f64::NAN,
            })
            .word(),
        )
        .unwrap();
        assert_eq!(clipped.timed, FIELD_MAX as f64 / 8.0);
        assert_eq!((clipped.untimed, clipped.inside), (0.0, 0.0));
        assert_eq!(as_calibration(Event::probe().word()), None);
        assert!(is_probe(Event::probe().word()));
        assert!(!is_probe(Event::calibration(c).word()));
        assert_eq!(as_calibration(Event::time(5).word()), None);
    }
}
