//! HTTP body compression as Triton's HTTP front has it (tritonclient.http's
//! `request_compression_algorithm` and `response_compression_algorithm`): request bodies sent
//! with `Content-Encoding: gzip` or `deflate` (zlib's format, as HTTP means it) are
//! decompressed, bounded by the request size limit so that a small body that inflates without
//! end is refused before it is held; responses are compressed when `Accept-Encoding` asks.

use std::io::Read;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};

use crate::error::ApiError;

/// A content coding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// gzip (RFC 1952).
    Gzip,
    /// deflate: zlib's format (RFC 1950), as HTTP's `deflate` is.
    Deflate,
}

impl Coding {
    fn from_token(token: &str) -> Option<Coding> {
        match token.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Some(Coding::Gzip),
            "deflate" => Some(Coding::Deflate),
            _ => None,
        }
    }

    /// Its name in HTTP headers.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
        }
    }
}

/// The coding of a request body (`None`: as sent), or a 415 naming what is supported.
pub fn request_coding(headers: &HeaderMap) -> Result<Option<Coding>, ApiError> {
    let Some(value) = headers.get(header::CONTENT_ENCODING) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("?").trim();
    if text.is_empty() || text.eq_ignore_ascii_case("identity") {
        return Ok(None);
    }
    Coding::from_token(text).map(Some).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Encoding {text} is not supported (gzip, deflate or identity)"),
        )
    })
}

/// `body` decompressed; more than `limit` bytes of it is a 413 (the reading stops there), a
/// malformed stream a 400.
pub fn decompress(coding: Coding, body: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let reader: Box<dyn Read + '_> = match coding {
        Coding::Gzip => Box::new(flate2::read::GzDecoder::new(body)),
        Coding::Deflate => Box::new(flate2::read::ZlibDecoder::new(body)),
    };
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            ApiError::bad_request(format!(
                "the {} request body is malformed: {e}",
                coding.name()
            ))
        })?;
    if out.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body decompresses to more than {limit} bytes (--max-request-size)"
            ),
        ));
    }
    Ok(out)
}

/// The coding a response should have by the request's `Accept-Encoding` (gzip preferred over
/// deflate; a coding with `q=0` is refused by the client).
pub fn response_coding(headers: &HeaderMap) -> Option<Coding> {
    let accept = headers.get(header::ACCEPT_ENCODING)?.to_str().ok()?;
    let mut best = None;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let Some(coding) = parts.next().and_then(Coding::from_token) else {
            continue;
        };
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        if !refused && (best.is_none() || coding == Coding::Gzip) {
            best = Some(coding);
        }
    }
    best
}

/// `body` compressed with `coding` (the fast level: a response should not wait on it), and the
/// `Content-Encoding` value to send with it.
pub fn compress(coding: Coding, body: &[u8]) -> (Vec<u8>, HeaderValue) {
    use std::io::Write;
    let level = flate2::Compression::fast();
    let out = match coding {
        Coding::Gzip => {
            let mut w = flate2::write::GzEncoder::new(Vec::new(), level);
            w.write_all(body).and_then(|_| w.finish())
        }
        Coding::Deflate => {
            let mut w = flate2::write::ZlibEncoder::new(Vec::new(), level);
            w.write_all(body).and_then(|_| w.finish())
        }
    };
    let out = out.expect("compressing into memory does not fail");
    (out, HeaderValue::from_static(coding.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, value.parse().unwrap());
        h
    }

    #[test]
    fn bodies_round_trip_both_codings() {
        let body = b"{\"inputs\": []}".repeat(100);
        for coding in [Coding::Gzip, Coding::Deflate] {
            let (packed, name) = compress(coding, &body);
            assert!(packed.len() < body.len());
            assert_eq!(name, coding.name());
            assert_eq!(decompress(coding, &packed, body.len()).unwrap(), body);
        }
    }

    #[test]
    fn a_bomb_stops_at_the_limit_and_garbage_is_400() {
        let (bomb, _) = compress(Coding::Gzip, &vec![0u8; 8 << 20]);
        assert!(bomb.len() < 64 << 10);
        let e = decompress(Coding::Gzip, &bomb, 1 << 20).unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(
            e.message.contains("more than 1048576 bytes"),
            "{}",
            e.message
        );
        let e = decompress(Coding::Deflate, b"not zlib at all", 1 << 20).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e
            .message
            .starts_with("the deflate request body is malformed"));
    }

    #[test]
    fn headers_choose_the_coding() {
        let ce = |v: &str| request_coding(&headers(header::CONTENT_ENCODING, v));
        assert_eq!(ce("gzip").unwrap(), Some(Coding::Gzip));
        assert_eq!(ce("identity").unwrap(), None);
        assert_eq!(request_coding(&HeaderMap::new()).unwrap(), None);
        let e = ce("br").unwrap_err();
        assert_eq!(e.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let ae = |v: &str| response_coding(&headers(header::ACCEPT_ENCODING, v));
        assert_eq!(ae("deflate"), Some(Coding::Deflate));
        assert_eq!(ae("deflate, gzip;q=0.5"), Some(Coding::Gzip));
        assert_eq!(ae("gzip;q=0, deflate"), Some(Coding::Deflate));
        assert_eq!(ae("br"), None);
        assert_eq!(response_coding(&HeaderMap::new()), None);
    }
}
