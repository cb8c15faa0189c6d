//! Newtypes for the quantities ServeSim computes with.
//!
//! Architecture invariant: simulated time is an integer count of nanoseconds ([`Ticks`]); token,
//! block and byte counts are unsigned integers. Their `+`, `-`, `+=` and `-=` saturate (at 0 and
//! `u64::MAX`) instead of wrapping or panicking; validation (`crate::bounds`) keeps real runs far
//! from either end, so saturation is a guard, never a result. Floating point appears only in derived rates and
//! in the step-time model, and every transcendental function goes through `libm` so that native
//! and wasm builds produce bit-identical results.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

macro_rules! count_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            pub const ZERO: $name = $name(0);
            #[inline]
            pub fn get(self) -> u64 {
                self.0
            }
            #[inline]
            pub fn saturating_sub(self, other: $name) -> $name {
                $name(self.0.saturating_sub(other.0))
            }
            /// `self + other`, `None` on overflow.
            #[inline]
            pub fn checked_add(self, other: $name) -> Option<$name> {
                self.0.checked_add(other.0).map($name)
            }
            /// `self * k`, saturating at `u64::MAX`.
            #[inline]
            pub fn saturating_mul(self, k: u64) -> $name {
                $name(self.0.saturating_mul(k))
            }
        }
        impl Add for $name {
            type Output = $name;
            #[inline]
            fn add(self, rhs: $name) -> $name {
                $name(self.0.saturating_add(rhs.0))
            }
        }
        impl AddAssign for $name {
            #[inline]
            fn add_assign(&mut self, rhs: $name) {
                self.0 = self.0.saturating_add(rhs.0);
            }
        }
        impl Sub for $name {
            type Output = $name;
            #[inline]
            fn sub(self, rhs: $name) -> $name {
                $name(self.0.saturating_sub(rhs.0))
            }
        }
        impl SubAssign for $name {
            #[inline]
            fn sub_assign(&mut self, rhs: $name) {
                self.0 = self.0.saturating_sub(rhs.0);
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

count_newtype!(
    /// A number of tokens.
    Tokens
);
count_newtype!(
    /// A number of KV-cache blocks (pages of `block_size` tokens).
    Blocks
);
count_newtype!(
    /// A number of bytes.
    Bytes
);
count_newtype!(
    /// Simulated time in nanoseconds since the start of a run.
    Ticks
);

/// Bytes in one GiB.
pub const GIB: u64 = 1 << 30;
/// Bytes in one MiB.
pub const MIB: u64 = 1 << 20;
/// Nanoseconds per simulated second.
pub const TICKS_PER_SECOND: u64 = 1_000_000_000;

impl Bytes {
    /// The value in GiB (2^30 bytes), as vLLM prints memory.
    pub fn gib(self) -> f64 {
        self.0 as f64 / GIB as f64
    }
    /// Bytes from a GiB figure, rounded down to whole bytes.
    pub fn from_gib(gib: f64) -> Bytes {
        Bytes((gib * GIB as f64) as u64)
    }
}

impl Ticks {
    /// Converts seconds to ticks, rounding to the nearest nanosecond (negative and NaN give 0,
    /// beyond `u64::MAX` ns saturates: Rust's float-to-integer cast).
    pub fn from_secs_f64(s: f64) -> Ticks {
        Ticks(libm::round(s * TICKS_PER_SECOND as f64) as u64)
    }
    /// The time in seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / TICKS_PER_SECOND as f64
    }
    /// The time in milliseconds.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_conversions_round_trip() {
        assert_eq!(Ticks::from_secs_f64(1.5), Ticks(1_500_000_000));
        assert_eq!(Ticks(2_500_000).as_millis_f64(), 2.5);
        assert_eq!(Ticks::from_secs_f64(900.0).as_secs_f64(), 900.0);
    }

    #[test]
    fn bytes_gib() {
        assert_eq!(Bytes(3 * GIB).gib(), 3.0);
        assert_eq!(Bytes::from_gib(0.5), Bytes(GIB / 2));
    }

    #[test]
    fn arithmetic() {
        let mut t = Tokens(5);
        t += Tokens(3);
        assert_eq!(t - Tokens(2), Tokens(6));
        assert_eq!(Tokens(1).saturating_sub(Tokens(4)), Tokens::ZERO);
    }

    #[test]
    fn arithmetic_saturates_instead_of_overflowing() {
        assert_eq!(Ticks(u64::MAX) + Ticks(1), Ticks(u64::MAX));
        assert_eq!(Ticks(1) - Ticks(2), Ticks::ZERO);
        let mut t = Tokens(u64::MAX - 1);
        t += Tokens(5);
        assert_eq!(t, Tokens(u64::MAX));
        assert_eq!(Ticks(2).checked_add(Ticks(u64::MAX)), None);
        assert_eq!(Bytes(u64::MAX / 2).saturating_mul(3), Bytes(u64::MAX));
        assert_eq!(Ticks::from_secs_f64(1e300), Ticks(u64::MAX));
        assert_eq!(Ticks::from_secs_f64(f64::NAN), Ticks::ZERO);
    }
}
