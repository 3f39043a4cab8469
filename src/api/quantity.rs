//! Kubernetes resource quantities (`100m`, `128Mi`, `1e3`) in the string form Go's
//! `resource.Quantity` marshals them to. Kruise decodes a SidecarSet into Go types before hashing and
//! before building its patch, so a quantity written as `0.5` reaches the hash (and the stored object)
//! as `500m`, and `1000m` as `1`. Reproducing that is needed for Kruise-identical hashes.
//!
//! Rules (apimachinery `resource.ParseQuantity`, `CanonicalizeBytes`):
//! - a quantity already in canonical form keeps its original spelling;
//! - otherwise the value is written with the largest suffix that keeps an integer mantissa:
//!   decimal values with an exponent that is a multiple of 3 (`n u m "" k M G T P E`), binary
//!   values (`Ki Mi ...`) only when integral and at least 1024 in magnitude;
//! - values finer than a nano-unit are rounded up to `1n`; `SetDefaults_ResourceList` rounds
//!   container resources up to milli-units.

/// The three formats a quantity remembers from its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// A parsed quantity: `mantissa * 10^scale`, the format, and the original text when Go would keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    scale: i32,
    format: Format,
    cached: Option<String>,
}

/// Values beyond this are out of what we model exactly; callers keep the original text then.
const LIMIT: i128 = 1 << 100;

fn suffix_of(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSi));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Some((2, 10, Format::BinarySi)),
        "Mi" => Some((2, 20, Format::BinarySi)),
        "Gi" => Some((2, 30, Format::BinarySi)),
        "Ti" => Some((2, 40, Format::BinarySi)),
        "Pi" => Some((2, 50, Format::BinarySi)),
        "Ei" => Some((2, 60, Format::BinarySi)),
        s if s.starts_with(['e', 'E']) => {
            let e: i32 = s[1..].parse().ok()?;
            Some((10, e, Format::DecimalExponent))
        }
        _ => None,
    }
}

/// Parse a quantity; `None` when it is not one (Go's decoder would refuse the object).
pub fn parse(text: &str) -> Option<Quantity> {
    let s = text.trim();
    let (mantissa, scale, format, canonical) = parse_value(s)?;
    Some(Quantity { mantissa, scale, format, cached: canonical.then(|| s.to_owned()) })
}

/// The value of a quantity in base units as a float ([`Quantity::as_f64`]), without keeping its
/// text: the resourcesPolicy calculator parses the app containers' quantities on every pod.
pub fn parse_f64(text: &str) -> Option<f64> {
    let (mantissa, scale, format, _) = parse_value(text.trim())?;
    Some(Quantity { mantissa, scale, format, cached: None }.as_f64())
}

/// A trimmed quantity's mantissa, scale and format, and whether Go keeps its text as it is.
fn parse_value(s: &str) -> Option<(i128, i32, Format, bool)> {
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some((0, 0, Format::DecimalSi, true));
    }
    let (positive, num, denom, suffix) = split(s)?;
    let (base, exponent, format) = suffix_of(suffix)?;
    // Go trims leading zeros of the integer part before judging precision and canonical form.
    let num_trimmed = {
        let t = num.trim_start_matches('0');
        if t.is_empty() { "0" } else { t }
    };
    // The digits of `num_trimmed` then `denom` as one number (both are ASCII digits only).
    let digits = || num_trimmed.bytes().chain(denom.bytes());
    let unscaled = digits().try_fold(0i128, |v, d| {
        v.checked_mul(10)?.checked_add(i128::from(d - b'0')).filter(|v| *v < LIMIT)
    })?;
    let (mantissa, scale) = if base == 10 {
        (unscaled, exponent.checked_sub(i32::try_from(denom.len()).ok()?)?)
    } else {
        let m = unscaled.checked_mul(1i128.checked_shl(exponent as u32)?)?;
        (m, -(denom.len() as i32))
    };
    if mantissa >= LIMIT {
        return None;
    }
    let precise = match format {
        Format::BinarySi => {
            exponent >= 0 && denom.is_empty() && 15 - num_trimmed.len() as i32 - (exponent * 3 / 10) > 0
        }
        _ => 18 - (num_trimmed.len() + denom.len()) as i32 >= 0,
    };
    let canonical = precise
        && is_canonical(
            format,
            exponent,
            digits().next() == Some(b'0'),
            digits().rev().take(3).filter(|d| *d == b'0').count() == 3,
            unscaled,
            scale,
        );
    // Go's fast path keeps the original text when it is already canonical.
    let (mut mantissa, scale, format) =
        if canonical { (mantissa, scale, format) } else { normalized(mantissa, scale, format) };
    if !positive {
        mantissa = -mantissa;
    }
    Some((mantissa, scale, format, canonical))
}

/// A quantity's text in its parts: sign, integer digits, fraction digits and the suffix after
/// them. `None` when there are no digits.
fn split(s: &str) -> Option<(bool, &str, &str, &str)> {
    let (positive, rest) = match s.as_bytes()[0] {
        b'+' => (true, &s[1..]),
        b'-' => (false, &s[1..]),
        _ => (true, s),
    };
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let num = &rest[..int_len];
    let mut tail = &rest[int_len..];
    let mut denom = "";
    if let Some(after) = tail.strip_prefix('.') {
        let d = after.bytes().take_while(u8::is_ascii_digit).count();
        denom = &after[..d];
        tail = &after[d..];
    }
    if num.is_empty() && denom.is_empty() {
        return None;
    }
    Some((positive, num, denom, tail))
}

/// Whether a precise quantity's text is already in Go's canonical form (then it is kept as given).
/// `leading_zero` and `trailing_zeros`: the digits (integer part trimmed, then the fraction) start
/// with `0`, end with `000`.
fn is_canonical(
    format: Format,
    exponent: i32,
    leading_zero: bool,
    trailing_zeros: bool,
    unscaled: i128,
    scale: i32,
) -> bool {
    scale >= -9
        && match format {
            Format::BinarySi => exponent % 10 == 0 && (unscaled & 0x07) != 0,
            _ => scale % 3 == 0 && !trailing_zeros && !leading_zero,
        }
}

/// The value Go keeps when it does not keep the text: nothing finer than a nano-unit, and a binary
/// value below one shown as a decimal one.
fn normalized(mut mantissa: i128, mut scale: i32, mut format: Format) -> (i128, i32, Format) {
    // Round anything finer than a nano-unit up, away from zero.
    if scale < -9 {
        mantissa = shift_right_up(mantissa, (-9 - scale) as u32);
        scale = -9;
    }
    if format == Format::BinarySi && mantissa != 0 && is_below_one(mantissa, scale) {
        format = Format::DecimalSi;
    }
    (mantissa, scale, format)
}

fn is_below_one(mantissa: i128, scale: i32) -> bool {
    scale < 0 && 10i128.checked_pow((-scale) as u32).is_some_and(|p| mantissa.abs() < p)
}

/// Divide by 10^digits, rounding away from zero.
fn shift_right_up(mantissa: i128, digits: u32) -> i128 {
    let Some(p) = 10i128.checked_pow(digits) else { return mantissa.signum() };
    let q = mantissa / p;
    if mantissa % p == 0 { q } else { q + mantissa.signum() }
}

impl Quantity {
    /// The value in nano-units (10⁻⁹), rounded away from zero below that as Kubernetes stores it;
    /// `None` when it does not fit (exact comparisons, e.g. requests against limits).
    pub fn nanos(&self) -> Option<i128> {
        let shift = self.scale.checked_add(9)?;
        if shift >= 0 {
            self.mantissa.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)
        } else {
            Some(shift_right_up(self.mantissa, shift.unsigned_abs()))
        }
    }

    /// The value in base units as a float, for arithmetic that needs no exactness (the
    /// resourcesPolicy calculator, range checks).
    pub fn as_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.scale)
    }

    /// `RoundUp(scale)`: round away from zero to `10^scale` units; clears the cached text when
    /// the value had finer precision.
    pub fn round_up(&mut self, scale: i32) {
        if self.scale >= scale {
            return;
        }
        self.cached = None;
        self.mantissa = shift_right_up(self.mantissa, (scale - self.scale) as u32);
        self.scale = scale;
    }

    /// The Go `MarshalJSON` text.
    pub fn to_go_string(&self) -> String {
        if let Some(s) = &self.cached {
            return s.clone();
        }
        if self.mantissa == 0 {
            return "0".into();
        }
        let mut format = self.format;
        if format == Format::BinarySi {
            let integral = self.integral_value();
            match integral {
                Some(v) if v <= -1024 || v >= 1024 => return base1024(v),
                _ => format = Format::DecimalSi,
            }
        }
        // Decimal: move factors of ten into the exponent, then make it a multiple of three.
        let mut amount = self.mantissa;
        let mut exponent = self.scale;
        while amount % 10 == 0 {
            amount /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            amount *= 10;
            exponent -= 1;
        }
        let suffix = match (format, exponent) {
            (_, 0) => String::new(),
            (Format::DecimalSi, -9) => "n".into(),
            (Format::DecimalSi, -6) => "u".into(),
            (Format::DecimalSi, -3) => "m".into(),
            (Format::DecimalSi, 3) => "k".into(),
            (Format::DecimalSi, 6) => "M".into(),
            (Format::DecimalSi, 9) => "G".into(),
            (Format::DecimalSi, 12) => "T".into(),
            (Format::DecimalSi, 15) => "P".into(),
            (Format::DecimalSi, 18) => "E".into(),
            (_, e) => format!("e{e}"),
        };
        format!("{amount}{suffix}")
    }

    /// The value as an integer when it has no fractional part.
    fn integral_value(&self) -> Option<i128> {
        if self.scale >= 0 {
            self.mantissa.checked_mul(10i128.checked_pow(self.scale as u32)?)
        } else {
            let p = 10i128.checked_pow((-self.scale) as u32)?;
            (self.mantissa % p == 0).then(|| self.mantissa / p)
        }
    }
}

fn base1024(value: i128) -> String {
    let mut amount = value;
    let mut exponent = 0;
    while amount % 1024 == 0 && exponent < 6 {
        amount /= 1024;
        exponent += 1;
    }
    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exponent];
    format!("{amount}{suffix}")
}

/// A quantity given as JSON: a string, or a number (`cpu: 2` in YAML).
pub fn from_value(value: &serde_json::Value) -> Option<Quantity> {
    match value {
        serde_json::Value::String(s) => parse(s),
        serde_json::Value::Number(n) => parse(&n.to_string()),
        _ => None,
    }
}

/// The Go text of a quantity given as JSON (string or number), after `SetDefaults_ResourceList`'s
/// rounding to milli-units when `milli` is set. `None` when it is not a quantity.
pub fn go_text(value: &serde_json::Value, milli: bool) -> Option<String> {
    let mut q = from_value(value)?;
    if milli {
        q.round_up(-3);
    }
    Some(q.to_go_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        parse(s).map(|q| q.to_go_string()).unwrap_or_else(|| format!("<invalid {s}>"))
    }

    #[test]
    fn canonical_spellings_are_kept() {
        for s in ["100m", "128Mi", "1", "2Gi", "500M", "1k", "250m", "1Ki", "0"] {
            assert_eq!(canon(s), s);
        }
    }

    #[test]
    fn other_spellings_are_canonicalised_like_go() {
        // Examples from apimachinery's quantity tests (TestQuantityParse / canonical table).
        assert_eq!(canon("0.5"), "500m");
        assert_eq!(canon("1000m"), "1");
        assert_eq!(canon("1.5Gi"), "1536Mi");
        assert_eq!(canon("0.5Ki"), "512");
        assert_eq!(canon("1024"), "1024");
        assert_eq!(canon("2048Ki"), "2Mi");
        assert_eq!(canon("1e3"), "1e3");
        assert_eq!(canon("1000k"), "1M");
        assert_eq!(canon("0.1m"), "100u");
        // Go keeps the text of a canonical value even with leading zeros.
        assert_eq!(canon("01"), "01");
        assert_eq!(canon(".5"), "500m");
        assert_eq!(canon("12e6"), "12e6");
        assert_eq!(canon("-0.5"), "-500m");
        assert_eq!(canon("1.5"), "1500m");
        assert_eq!(canon("100Mi"), "100Mi");
    }

    #[test]
    fn finer_than_nano_rounds_up_and_defaulting_rounds_to_milli() {
        assert_eq!(canon("0.0000000001"), "1n");
        assert_eq!(go_text(&serde_json::json!("100u"), true).unwrap(), "1m");
        assert_eq!(go_text(&serde_json::json!("100m"), true).unwrap(), "100m");
        assert_eq!(go_text(&serde_json::json!(1), true).unwrap(), "1");
        assert_eq!(go_text(&serde_json::json!(0.25), true).unwrap(), "250m");
    }

    #[test]
    fn rejects_non_quantities() {
        for s in ["", "abc", "1Zi", "m", "1.2.3", "--1"] {
            assert!(parse(s).is_none(), "{s}");
        }
    }
}
