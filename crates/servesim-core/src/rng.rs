//! Deterministic random numbers: SplitMix64 (seeding, hashing) and xoshiro256** (streams).
//!
//! Architecture invariant: every random draw in the simulator comes from an [`Rng`] built from the
//! scenario seed and a fixed stream id ([`Stream`]), so adding draws to one subsystem never shifts
//! another subsystem's numbers. Transcendental functions go through `libm`, so native and wasm give
//! bit-identical draws.
//!
//! Sources: SplitMix64 and xoshiro256** by Blackman & Vigna (<https://prng.di.unimi.it/>); normal
//! variates by Box-Muller; gamma variates by Marsaglia & Tsang (2000), "A simple method for
//! generating gamma variables", with the `u^(1/k)` boost for shape < 1.

/// One step of SplitMix64: advances `state` and returns a well-mixed 64-bit value.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix64(*state)
}

/// SplitMix64's finaliser: a bijective 64-bit mixer, also used to derive block hash ids.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Combines two values into one hash (order-sensitive).
#[inline]
pub fn hash2(a: u64, b: u64) -> u64 {
    mix64(a.rotate_left(17) ^ mix64(b.wrapping_add(0x632B_E59B_D9B4_E019)))
}

/// The independent random streams of a scenario. One stream per subsystem keeps draws stable when
/// another subsystem changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Arrivals = 1,
    InputLengths = 2,
    OutputLengths = 3,
    Prefixes = 4,
    Sessions = 5,
    ThinkTime = 6,
    Router = 7,
    SpecAcceptance = 8,
    Test = 99,
}

/// xoshiro256** generator.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator seeded from a 64-bit seed via SplitMix64 (the seeding the authors recommend).
    pub fn new(seed: u64) -> Rng {
        let mut st = seed;
        let mut s = [0u64; 4];
        for x in s.iter_mut() {
            *x = splitmix64(&mut st);
        }
        if s == [0; 4] {
            s[0] = 1;
        }
        Rng { s }
    }

    /// The generator for one subsystem of a scenario.
    pub fn stream(seed: u64, stream: Stream) -> Rng {
        Rng::new(hash2(seed, stream as u64))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1]: safe for `log`.
    #[inline]
    pub fn next_f64_open0(&mut self) -> f64 {
        1.0 - self.next_f64()
    }

    /// Uniform integer in `[lo, hi]` (inclusive). Uses rejection to avoid modulo bias.
    pub fn range_u64(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        let n = span + 1;
        let zone = u64::MAX - (u64::MAX % n) - 1;
        loop {
            let x = self.next_u64();
            if x <= zone {
                return lo + x % n;
            }
        }
    }

    /// Exponential variate with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * libm::log(self.next_f64_open0())
    }

    /// Standard normal variate (Box-Muller, one of the pair).
    pub fn std_normal(&mut self) -> f64 {
        let u1 = self.next_f64_open0();
        let u2 = self.next_f64();
        libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * core::f64::consts::PI * u2)
    }

    /// Gamma variate with shape `k > 0` and scale `theta > 0` (Marsaglia-Tsang).
    pub fn gamma(&mut self, k: f64, theta: f64) -> f64 {
        // Terminates for every input: a shape that is not a positive finite number, or so large
        // (k > 1e12: CV below 1e-6) that Marsaglia-Tsang's acceptance test loses all precision,
        // returns the mean (the distribution's spread is below one part in a million).
        if !(k.is_finite() && k > 0.0 && k <= 1e12 && theta.is_finite()) {
            return if k.is_finite() && theta.is_finite() {
                (k * theta).max(0.0)
            } else {
                0.0
            };
        }
        if k < 1.0 {
            let u = self.next_f64_open0();
            return self.gamma(k + 1.0, theta) * libm::pow(u, 1.0 / k);
        }
        let d = k - 1.0 / 3.0;
        let c = 1.0 / libm::sqrt(9.0 * d);
        loop {
            let x = self.std_normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.next_f64_open0();
            if libm::log(u) < 0.5 * x * x + d - d * v + d * libm::log(v) {
                return d * v * theta;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_is_identical_and_streams_differ() {
        let mut a = Rng::stream(7, Stream::Arrivals);
        let mut b = Rng::stream(7, Stream::Arrivals);
        let mut c = Rng::stream(7, Stream::InputLengths);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn uniform_mean_and_range_bounds() {
        let mut r = Rng::new(1);
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        assert!((sum / n as f64 - 0.5).abs() < 0.01);
        for _ in 0..1000 {
            let k = r.range_u64(3, 5);
            assert!((3..=5).contains(&k));
        }
    }

    #[test]
    fn exponential_normal_gamma_moments() {
        let mut r = Rng::new(42);
        let n = 200_000;
        let (mut se, mut sn, mut sn2, mut sg, mut sg2) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for _ in 0..n {
            se += r.exponential(2.0);
            let z = r.std_normal();
            sn += z;
            sn2 += z * z;
            // shape 4, scale 0.5: mean 2, variance 1
            let g = r.gamma(4.0, 0.5);
            sg += g;
            sg2 += g * g;
        }
        let nf = n as f64;
        assert!((se / nf - 2.0).abs() < 0.03);
        assert!((sn / nf).abs() < 0.01);
        assert!((sn2 / nf - 1.0).abs() < 0.02);
        let gm = sg / nf;
        assert!((gm - 2.0).abs() < 0.02);
        assert!((sg2 / nf - gm * gm - 1.0).abs() < 0.03);
        // shape < 1 path: mean k*theta
        let mut s = 0.0;
        for _ in 0..n {
            s += r.gamma(0.25, 4.0);
        }
        assert!((s / nf - 1.0).abs() < 0.03);
    }
}
