//! Bytes as lowercase hex text: build-ids, snapshot digests, tokens; and
//! back (memory as gdb's machine interface prints it).

/// `bytes` as lowercase hex, two digits per byte.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// The bytes of hex text, two digits each (either case); None if it is
/// not that.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    digits
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_lowercase_digits_per_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(super::hex(&[]), "");
    }

    #[test]
    fn decodes_what_it_writes_and_refuses_the_rest() {
        let bytes = [0x00, 0x0f, 0xa0, 0xff];
        assert_eq!(super::decode(&super::hex(&bytes)), Some(bytes.to_vec()));
        assert_eq!(super::decode("0A"), Some(vec![0x0a]));
        assert_eq!(super::decode("abc"), None);
        assert_eq!(super::decode("zz"), None);
    }
}
