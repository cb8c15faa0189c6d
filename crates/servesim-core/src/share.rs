//! Share-link codec: a scenario's JSON text <-> the URL fragment the page puts after `#s=`.
//!
//! Format (documented in docs/web.md): `v1.` followed by the unpadded base64url (RFC 4648 §5)
//! encoding of the zlib stream (RFC 1950: DEFLATE, RFC 1951, plus a 2-byte header and an Adler-32
//! checksum) of the UTF-8 JSON text. The checksum is what lets a tampered or cut link be reported
//! as damaged instead of decoding to a different scenario.
//!
//! Decoding treats the fragment as hostile input: the encoded length is checked before any work,
//! inflation stops at [`MAX_INFLATED_BYTES`] (no zip bombs), and every failure is a typed
//! [`ShareError`] whose message says what is wrong and what the user can do.

use thiserror::Error;

/// The version prefix written by [`encode`] (without the dot).
pub const VERSION: &str = "v1";
/// Largest encoded fragment accepted, in bytes (browsers and chat tools cut longer URLs anyway).
pub const MAX_ENCODED_BYTES: usize = 64 * 1024;
/// Largest inflated JSON accepted, in bytes.
pub const MAX_INFLATED_BYTES: usize = 1024 * 1024;

/// Why a share fragment could not be decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ShareError {
    #[error("the link is empty: it carries no scenario")]
    Empty,
    #[error(
        "the link is too long ({len} bytes; at most {max} are accepted): it was probably not made by ServeSim"
    )]
    TooLong { len: usize, max: usize },
    #[error(
        "the link has no version prefix (expected `{VERSION}.`): it is not a ServeSim share link"
    )]
    MissingVersion,
    #[error(
        "the link has version `{found}`, but this ServeSim reads only `{VERSION}`: open it with the version that made it"
    )]
    UnsupportedVersion { found: String },
    #[error("the link contains `{ch}` at position {pos}, which is not base64url: the link was cut or altered")]
    BadBase64 { pos: usize, ch: char },
    #[error("the link's base64 has an impossible length: the link was cut")]
    BadBase64Length,
    #[error("the link's data is damaged ({detail}): the link was cut or altered; copy it again")]
    Corrupt { detail: String },
    #[error("the link's scenario inflates past {max} bytes: refusing it")]
    InflatedTooLarge { max: usize },
    #[error("the link's scenario is not UTF-8 text: the link was altered")]
    NotUtf8,
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Encodes a scenario's JSON text as `v1.<base64url(deflate(json))>`.
pub fn encode(json: &str) -> String {
    let packed = miniz_oxide::deflate::compress_to_vec_zlib(json.as_bytes(), 9);
    let mut out = String::with_capacity(VERSION.len() + 1 + packed.len().div_ceil(3) * 4);
    out.push_str(VERSION);
    out.push('.');
    base64url_encode(&packed, &mut out);
    out
}

/// Decodes a fragment made by [`encode`] back into the JSON text. A leading `#` and `s=` are
/// tolerated so the page can pass `location.hash` as is. Does not parse the JSON: the caller
/// validates it as a scenario.
pub fn decode(fragment: &str) -> Result<String, ShareError> {
    let f = fragment.trim();
    let f = f.strip_prefix('#').unwrap_or(f);
    let f = f.strip_prefix("s=").unwrap_or(f);
    if f.is_empty() {
        return Err(ShareError::Empty);
    }
    if f.len() > MAX_ENCODED_BYTES {
        return Err(ShareError::TooLong {
            len: f.len(),
            max: MAX_ENCODED_BYTES,
        });
    }
    let Some((version, payload)) = f.split_once('.') else {
        return Err(ShareError::MissingVersion);
    };
    if version != VERSION {
        let found: String = version.chars().take(16).collect();
        return Err(ShareError::UnsupportedVersion { found });
    }
    if payload.is_empty() {
        return Err(ShareError::Empty);
    }
    let packed = base64url_decode(payload)?;
    let bytes =
        miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&packed, MAX_INFLATED_BYTES)
            .map_err(|e| match e.status {
                miniz_oxide::inflate::TINFLStatus::HasMoreOutput => ShareError::InflatedTooLarge {
                    max: MAX_INFLATED_BYTES,
                },
                miniz_oxide::inflate::TINFLStatus::FailedCannotMakeProgress => {
                    ShareError::Corrupt {
                        detail: "the compressed data ends early".into(),
                    }
                }
                miniz_oxide::inflate::TINFLStatus::Adler32Mismatch => ShareError::Corrupt {
                    detail: "checksum mismatch".into(),
                },
                other => ShareError::Corrupt {
                    detail: format!("inflate status {other:?}"),
                },
            })?;
    String::from_utf8(bytes).map_err(|_| ShareError::NotUtf8)
}

fn base64url_encode(data: &[u8], out: &mut String) {
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let idx = (n >> (18 - 6 * i)) & 63;
            out.push(ALPHABET[idx as usize] as char);
        }
    }
}

fn base64url_value(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some(u32::from(c - b'A')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

fn base64url_decode(text: &str) -> Result<Vec<u8>, ShareError> {
    // Tolerate padding some chat tools add, but nothing else.
    let text = text.trim_end_matches('=');
    let bytes = text.as_bytes();
    if bytes.len() % 4 == 1 {
        return Err(ShareError::BadBase64Length);
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3 + 2);
    for (ci, chunk) in bytes.chunks(4).enumerate() {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = base64url_value(c).ok_or_else(|| ShareError::BadBase64 {
                pos: ci * 4 + i,
                ch: text[ci * 4 + i..].chars().next().unwrap_or('?'),
            })?;
            n |= v << (18 - 6 * i);
        }
        let produced = chunk.len() - 1; // 4 chars -> 3 bytes, 3 -> 2, 2 -> 1
                                        // A canonical encoder leaves the unused low bits of a short final group at zero.
        if produced < 3 && n & ((1 << (24 - 8 * produced)) - 1) != 0 {
            return Err(ShareError::Corrupt {
                detail: "non-zero padding bits in the last base64 character".into(),
            });
        }
        for i in 0..produced {
            out.push(((n >> (16 - 8 * i)) & 0xff) as u8);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"{"model":{"catalog":"meta-llama/Llama-3.1-8B-Instruct"},"gpu":"H100-SXM-80GB","parallelism":{"tp":2,"dp":1,"ep":1},"kv_cache_dtype":"fp8","workload":{"isl":1024,"osl":256},"sweep":[1,2,4,8,16,32,64,128],"note":"ünïcödé ✓"}"#;

    #[test]
    fn round_trip_restores_the_exact_text() {
        let link = encode(SCENARIO);
        assert!(link.starts_with("v1."));
        assert_eq!(decode(&link).unwrap(), SCENARIO);
    }

    #[test]
    fn encoded_link_uses_only_url_safe_characters() {
        let link = encode(SCENARIO);
        let payload = link.strip_prefix("v1.").unwrap();
        assert!(payload
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }

    #[test]
    fn round_trip_works_for_every_payload_length_mod_three() {
        // base64 tails differ for lengths 0, 1, 2 mod 3: exercise all through the codec itself.
        for extra in 0..6 {
            let s = format!("{{\"x\":\"{}\"}}", "a".repeat(extra));
            assert_eq!(decode(&encode(&s)).unwrap(), s);
        }
    }

    #[test]
    fn base64url_matches_rfc4648_test_vectors() {
        // RFC 4648 §10 vectors (padding removed, as base64url without padding).
        let cases = [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in cases {
            let mut s = String::new();
            base64url_encode(plain.as_bytes(), &mut s);
            assert_eq!(s, coded);
            assert_eq!(base64url_decode(coded).unwrap(), plain.as_bytes());
        }
        // The two url-safe characters: 0xfb 0xff -> "-_8".
        let mut s = String::new();
        base64url_encode(&[0xfb, 0xff], &mut s);
        assert_eq!(s, "-_8");
    }

    #[test]
    fn repetitive_scenarios_compress() {
        let big = format!("{{\"levels\":[{}]}}", vec!["1024"; 500].join(","));
        let link = encode(&big);
        assert!(
            link.len() * 5 < big.len(),
            "{} vs {}",
            link.len(),
            big.len()
        );
    }

    #[test]
    fn hash_and_key_prefixes_are_accepted() {
        let link = encode(SCENARIO);
        assert_eq!(decode(&format!("#s={link}")).unwrap(), SCENARIO);
        assert_eq!(decode(&format!("s={link}")).unwrap(), SCENARIO);
    }

    #[test]
    fn empty_fragment_is_rejected() {
        assert_eq!(decode(""), Err(ShareError::Empty));
        assert_eq!(decode("#s="), Err(ShareError::Empty));
        assert_eq!(decode("v1."), Err(ShareError::Empty));
    }

    #[test]
    fn oversized_fragment_is_rejected_before_decoding() {
        let huge = format!("v1.{}", "!".repeat(MAX_ENCODED_BYTES));
        // The '!' would be a base64 error; the size check must come first.
        assert_eq!(
            decode(&huge),
            Err(ShareError::TooLong {
                len: MAX_ENCODED_BYTES + 3,
                max: MAX_ENCODED_BYTES
            })
        );
    }

    #[test]
    fn wrong_or_missing_version_is_rejected() {
        let link = encode(SCENARIO);
        let payload = link.strip_prefix("v1.").unwrap();
        assert_eq!(
            decode(&format!("v2.{payload}")),
            Err(ShareError::UnsupportedVersion { found: "v2".into() })
        );
        assert_eq!(decode(payload), Err(ShareError::MissingVersion));
    }

    #[test]
    fn non_base64_characters_are_rejected_with_position() {
        let err = decode("v1.abc+def").unwrap_err();
        assert_eq!(err, ShareError::BadBase64 { pos: 3, ch: '+' });
        assert!(err.to_string().contains("not base64url"));
        // A multi-byte character is reported whole, without panicking on a char boundary.
        assert_eq!(
            decode("v1.ab€d"),
            Err(ShareError::BadBase64 { pos: 2, ch: '€' })
        );
    }

    #[test]
    fn impossible_base64_length_is_rejected() {
        assert_eq!(decode("v1.abcde"), Err(ShareError::BadBase64Length));
    }

    #[test]
    fn non_canonical_base64_tail_is_rejected() {
        // "Zh" carries 'f' plus non-zero padding bits; only "Zg" is canonical.
        assert_eq!(base64url_decode("Zg").unwrap(), b"f");
        assert!(matches!(
            base64url_decode("Zh"),
            Err(ShareError::Corrupt { .. })
        ));
    }

    #[test]
    fn truncated_link_is_rejected() {
        let link = encode(SCENARIO);
        // Cut the payload at several places; every cut must fail cleanly (never panic, never
        // yield the original text).
        for cut in [link.len() / 2, link.len() - 4, link.len() - 8] {
            let r = decode(&link[..cut]);
            assert!(r.is_err(), "cut at {cut} decoded to {r:?}");
        }
    }

    #[test]
    fn tampered_link_fails_the_checksum_or_decodes_unchanged() {
        let link = encode(SCENARIO);
        let bytes = link.as_bytes();
        let mut failures = 0;
        for i in 3..bytes.len() {
            let mut t = bytes.to_vec();
            t[i] = if t[i] == b'A' { b'B' } else { b'A' };
            let t = String::from_utf8(t).unwrap();
            match decode(&t) {
                // The only harmless change is one in the unused padding bits of the DEFLATE
                // stream's last byte; anything that changes the text must fail the checksum.
                Ok(s) => assert_eq!(s, SCENARIO, "tamper at {i} decoded to different text"),
                Err(e) => {
                    assert!(
                        matches!(e, ShareError::Corrupt { .. }),
                        "tamper at {i}: {e:?}"
                    );
                    failures += 1;
                }
            }
        }
        assert!(
            failures * 10 >= (bytes.len() - 3) * 9,
            "{failures} of {}",
            bytes.len() - 3
        );
    }

    #[test]
    fn zip_bomb_is_refused() {
        let bomb = " ".repeat(MAX_INFLATED_BYTES + 1);
        let link = encode(&bomb);
        assert!(
            link.len() < MAX_ENCODED_BYTES,
            "bomb link is {} bytes",
            link.len()
        );
        assert_eq!(
            decode(&link),
            Err(ShareError::InflatedTooLarge {
                max: MAX_INFLATED_BYTES
            })
        );
    }

    #[test]
    fn non_utf8_payload_is_rejected() {
        let packed = miniz_oxide::deflate::compress_to_vec_zlib(&[0xff, 0xfe, 0x00], 6);
        let mut link = String::from("v1.");
        base64url_encode(&packed, &mut link);
        assert_eq!(decode(&link), Err(ShareError::NotUtf8));
    }
}
