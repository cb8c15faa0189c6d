//! Expert-parallel load at small batch: with `ep > 1` each GPU holds whole experts, and every MoE
//! layer waits for the GPU that activated the most of its own experts (the layer's partial outputs
//! are summed across the group before the next layer starts), so a step reads the expert weights
//! of that slowest GPU, not of the average one (docs/step-time.md §2 "Expert-parallel straggler").

/// Expected number of experts the busiest of `ranks` GPUs activates, each GPU holding `local`
/// experts and each expert activated with probability `f` independently (uniform routing:
/// `f = 1 - (1 - k/E)^T`): the expected maximum of `ranks` independent Binomial(`local`, `f`)
/// counts, `E[max] = sum_{j=0}^{local-1} (1 - F(j)^ranks)` with `F` the binomial CDF. Equal to
/// `local x f` for one rank; never above `local`.
pub fn expected_busiest(local: u32, f: f64, ranks: u32) -> f64 {
    let n = local as f64;
    if local == 0 || f.is_nan() || f <= 0.0 {
        return 0.0;
    }
    if f >= 1.0 {
        return n;
    }
    if ranks <= 1 {
        return n * f;
    }
    let m = ranks as i32;
    // The CDF is built from the side whose success probability is at most 1/2, so `(1 - g)^n`
    // (at least 2^-n) does not underflow for any expert count a model has.
    if f <= 0.5 {
        // E[max X] = sum_j P(max X > j) = sum_j (1 - F_X(j)^m).
        let terms = binomial_cdf_terms(local, f);
        let mut sum = 0.0;
        for (j, cdf) in terms.enumerate() {
            let t = 1.0 - cdf.powi(m);
            sum += t;
            if t < 1e-12 && j as f64 > n * f {
                break;
            }
        }
        sum.min(n)
    } else {
        // The busiest GPU is the one with the fewest experts left idle: with Y = local - X ~
        // Binomial(local, 1 - f), E[max X] = local - E[min Y] and E[min Y] = sum_j (1 - F_Y(j))^m.
        let terms = binomial_cdf_terms(local, 1.0 - f);
        let mut min_idle = 0.0;
        for cdf in terms {
            let t = (1.0 - cdf).powi(m);
            min_idle += t;
            if t < 1e-12 {
                break;
            }
        }
        (n - min_idle).clamp(n * f, n)
    }
}

/// `F(0), F(1), ..., F(n - 1)` of Binomial(`n`, `g`), `0 < g <= 1/2`, by the pmf recurrence
/// `p(j + 1) = p(j) (n - j) / (j + 1) x g / (1 - g)` from `p(0) = (1 - g)^n`.
fn binomial_cdf_terms(n: u32, g: f64) -> impl Iterator<Item = f64> {
    let ratio = g / (1.0 - g);
    let mut p = libm::pow(1.0 - g, n as f64);
    let mut cdf = 0.0;
    (0..n).map(move |j| {
        cdf += p;
        p *= (n - j) as f64 / (j + 1) as f64 * ratio;
        cdf.min(1.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force: the distribution of the maximum of `ranks` binomials by convolution of CDFs.
    fn brute(local: u32, f: f64, ranks: u32) -> f64 {
        let n = local as usize;
        let mut pmf = vec![0.0; n + 1];
        for (j, p) in pmf.iter_mut().enumerate() {
            let mut c = 1.0;
            for i in 0..j {
                c *= (n - i) as f64 / (i + 1) as f64;
            }
            *p = c * f.powi(j as i32) * (1.0 - f).powi((n - j) as i32);
        }
        let mut cdf = 0.0;
        let mut prev_max_cdf = 0.0;
        let mut e = 0.0;
        for (j, p) in pmf.iter().enumerate() {
            cdf += p;
            let max_cdf = f64::min(cdf, 1.0).powi(ranks as i32);
            e += j as f64 * (max_cdf - prev_max_cdf);
            prev_max_cdf = max_cdf;
        }
        e
    }

    #[test]
    fn matches_the_maximum_of_binomials_computed_directly() {
        for &(local, ranks) in &[(32u32, 8u32), (64, 4), (128, 2), (16, 16), (48, 8)] {
            for &f in &[0.01, 0.05, 0.119, 0.3, 0.5, 0.51, 0.7, 0.9, 0.99] {
                let a = expected_busiest(local, f, ranks);
                let b = brute(local, f, ranks);
                assert!(
                    (a - b).abs() < 1e-6 * local as f64,
                    "{local} {f} {ranks}: {a} vs {b}"
                );
                assert!(a >= local as f64 * f - 1e-9 && a <= local as f64 + 1e-9);
            }
        }
    }

    #[test]
    fn one_rank_is_the_mean_and_the_edges_are_exact() {
        assert_eq!(expected_busiest(64, 0.25, 1), 16.0);
        assert_eq!(expected_busiest(64, 0.0, 8), 0.0);
        assert_eq!(expected_busiest(64, 1.0, 8), 64.0);
        assert_eq!(expected_busiest(0, 0.5, 8), 0.0);
        // MiniMax-M2.5 (256 experts, 8 per token) at 4 decode tokens over EP 4: 64 experts per
        // GPU, f = 1 - (1 - 8/256)^4; the busiest GPU reads about a third more than the mean.
        let f = 1.0 - (1.0f64 - 8.0 / 256.0).powi(4);
        let mean = 64.0 * f;
        let busiest = expected_busiest(64, f, 4);
        assert!(
            busiest / mean > 1.25 && busiest / mean < 1.45,
            "{busiest} / {mean}"
        );
        // Many tokens: every GPU reads nearly all its experts, and the imbalance vanishes.
        let f = 1.0 - (1.0f64 - 8.0 / 256.0).powi(512);
        assert!(expected_busiest(64, f, 4) / (64.0 * f) < 1.0 + 1e-6);
    }
}
