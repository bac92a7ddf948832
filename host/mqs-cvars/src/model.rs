//! The model of MPI_T control variables: datatypes, values, scopes,
//! bindings, verbosities, enumerations, listings and filters; what crosses
//! the helper's process boundary and what `render` prints.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Version of the JSON documents `--json` prints for cvars.
pub const SCHEMA_VERSION: u32 = 1;

/// The MPI datatypes a control variable may have. The standard permits the
/// first seven; Open MPI uses the others too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Datatype {
    Int,
    Unsigned,
    UnsignedLong,
    UnsignedLongLong,
    Count,
    Char,
    Double,
    Long,
    LongLong,
    CBool,
    Int32,
    Uint32,
    Int64,
    Uint64,
}

impl Datatype {
    pub const ALL: [Datatype; 14] = [
        Self::Int,
        Self::Unsigned,
        Self::UnsignedLong,
        Self::UnsignedLongLong,
        Self::Count,
        Self::Char,
        Self::Double,
        Self::Long,
        Self::LongLong,
        Self::CBool,
        Self::Int32,
        Self::Uint32,
        Self::Int64,
        Self::Uint64,
    ];

    /// The name in C.
    pub fn mpi_name(self) -> &'static str {
        match self {
            Self::Int => "MPI_INT",
            Self::Unsigned => "MPI_UNSIGNED",
            Self::UnsignedLong => "MPI_UNSIGNED_LONG",
            Self::UnsignedLongLong => "MPI_UNSIGNED_LONG_LONG",
            Self::Count => "MPI_COUNT",
            Self::Char => "MPI_CHAR",
            Self::Double => "MPI_DOUBLE",
            Self::Long => "MPI_LONG",
            Self::LongLong => "MPI_LONG_LONG",
            Self::CBool => "MPI_C_BOOL",
            Self::Int32 => "MPI_INT32_T",
            Self::Uint32 => "MPI_UINT32_T",
            Self::Int64 => "MPI_INT64_T",
            Self::Uint64 => "MPI_UINT64_T",
        }
    }

    /// Bytes per element on LP64 Linux (MPI_Count is a long long in both
    /// families).
    pub fn size(self) -> usize {
        match self {
            Self::Char | Self::CBool => 1,
            Self::Int | Self::Unsigned | Self::Int32 | Self::Uint32 => 4,
            Self::UnsignedLong
            | Self::UnsignedLongLong
            | Self::Count
            | Self::Double
            | Self::Long
            | Self::LongLong
            | Self::Int64
            | Self::Uint64 => 8,
        }
    }

    /// One of the datatypes the MPI_T chapter allows (MPI-3.1 section
    /// 14.3.5, "Datatype System").
    pub fn is_standard(self) -> bool {
        matches!(
            self,
            Self::Int
                | Self::Unsigned
                | Self::UnsignedLong
                | Self::UnsignedLongLong
                | Self::Count
                | Self::Char
                | Self::Double
        )
    }

    fn signed(self) -> bool {
        matches!(
            self,
            Self::Int | Self::Count | Self::Long | Self::LongLong | Self::Int32 | Self::Int64
        )
    }

    /// Decodes `count` elements from native-endian bytes (`bytes` holds at
    /// least `count * size`; for MPI_CHAR the text ends at the first NUL).
    pub fn decode(self, bytes: &[u8], count: usize) -> Value {
        if self == Self::Char {
            let text = &bytes[..count.min(bytes.len())];
            let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
            return Value::Text(String::from_utf8_lossy(&text[..end]).into_owned());
        }
        let size = self.size();
        let numbers = bytes
            .chunks_exact(size)
            .take(count)
            .map(|chunk| {
                let mut raw = [0u8; 8];
                raw[..size].copy_from_slice(chunk);
                let unsigned = u64::from_ne_bytes(raw);
                match self {
                    Self::Double => Number::Float(f64::from_ne_bytes(raw)),
                    Self::CBool => Number::Bool(chunk[0] != 0),
                    _ if self.signed() => Number::Signed(match size {
                        4 => {
                            i64::from(i32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
                        }
                        _ => unsigned as i64,
                    }),
                    _ => Number::Unsigned(unsigned),
                }
            })
            .collect();
        Value::Numbers(numbers)
    }

    /// Encodes a value for MPI_T_cvar_write: `count` elements, native
    /// endian; None if the value does not fit the type.
    pub fn encode(self, value: &Value, count: usize) -> Option<Vec<u8>> {
        let size = self.size();
        match (self, value) {
            (Self::Char, Value::Text(text)) => {
                let mut bytes = text.as_bytes().to_vec();
                if bytes.contains(&0) || bytes.len() >= count.max(1) {
                    return None;
                }
                bytes.resize(count.max(bytes.len() + 1), 0);
                Some(bytes)
            }
            (Self::Char, _) | (_, Value::Text(_)) => None,
            (_, Value::Numbers(numbers)) => {
                if numbers.len() != count {
                    return None;
                }
                let mut out = Vec::with_capacity(count * size);
                for n in numbers {
                    let raw: [u8; 8] = match (self, *n) {
                        (Self::Double, Number::Float(f)) => f.to_ne_bytes(),
                        (Self::Double, Number::Signed(i)) => (i as f64).to_ne_bytes(),
                        (Self::Double, Number::Unsigned(u)) => (u as f64).to_ne_bytes(),
                        (Self::CBool, Number::Bool(b)) => u64::from(b).to_ne_bytes(),
                        (Self::CBool, Number::Signed(i @ (0 | 1))) => (i as u64).to_ne_bytes(),
                        (Self::CBool, Number::Unsigned(u @ (0 | 1))) => u.to_ne_bytes(),
                        (Self::Double | Self::CBool, _)
                        | (_, Number::Float(_) | Number::Bool(_)) => return None,
                        (_, Number::Signed(i)) => {
                            if !self.fits_signed(i) {
                                return None;
                            }
                            i.to_ne_bytes()
                        }
                        (_, Number::Unsigned(u)) => {
                            if !self.fits_unsigned(u) {
                                return None;
                            }
                            u.to_ne_bytes()
                        }
                    };
                    out.extend_from_slice(&raw[..size]);
                }
                Some(out)
            }
        }
    }

    fn fits_signed(self, i: i64) -> bool {
        match (self.size(), self.signed()) {
            (4, true) => i32::try_from(i).is_ok(),
            (4, false) => u32::try_from(i).is_ok(),
            (_, true) => true,
            (_, false) => i >= 0,
        }
    }

    fn fits_unsigned(self, u: u64) -> bool {
        match (self.size(), self.signed()) {
            (4, true) => i32::try_from(u).is_ok(),
            (4, false) => u32::try_from(u).is_ok(),
            (_, true) => i64::try_from(u).is_ok(),
            (_, false) => true,
        }
    }

    /// Parses text a user typed for this type (`--set`); an enumeration's
    /// item names are accepted for integers, `true`/`false` for booleans.
    pub fn parse(self, text: &str, enumeration: Option<&Enumeration>) -> Result<Value, String> {
        if self == Self::Char {
            return Ok(Value::Text(text.to_owned()));
        }
        let one = |part: &str| -> Result<Number, String> {
            let part = part.trim();
            if let Some(item) = enumeration.and_then(|e| {
                e.items
                    .iter()
                    .find(|item| item.name.eq_ignore_ascii_case(part))
            }) {
                return Ok(match self {
                    Self::CBool => Number::Bool(item.value != 0),
                    _ => Number::Signed(i64::from(item.value)),
                });
            }
            match self {
                Self::Double => part
                    .parse::<f64>()
                    .map(Number::Float)
                    .map_err(|_| format!("'{part}' is not a number")),
                Self::CBool => match part.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" => Ok(Number::Bool(true)),
                    "false" | "0" | "no" => Ok(Number::Bool(false)),
                    _ => Err(format!("'{part}' is not a boolean (true or false)")),
                },
                _ if self.signed() => part
                    .parse::<i64>()
                    .map(Number::Signed)
                    .map_err(|_| format!("'{part}' is not an integer")),
                _ => part
                    .parse::<u64>()
                    .map(Number::Unsigned)
                    .map_err(|_| format!("'{part}' is not a non-negative integer")),
            }
        };
        let numbers = text
            .split(',')
            .map(|part| {
                one(part).map_err(|why| match enumeration {
                    Some(e) => format!(
                        "{why}, nor one of the items of {}: {}",
                        e.name,
                        e.item_list()
                    ),
                    None => why,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::Numbers(numbers))
    }
}

impl fmt::Display for Datatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mpi_name())
    }
}

/// A datatype handle as the library returned it: known, or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DatatypeName {
    Known(Datatype),
    /// A handle that is none of [`Datatype`]'s (its raw bits).
    Unknown(u64),
}

impl DatatypeName {
    pub fn known(&self) -> Option<Datatype> {
        match self {
            Self::Known(d) => Some(*d),
            Self::Unknown(_) => None,
        }
    }
}

impl fmt::Display for DatatypeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Known(d) => f.write_str(d.mpi_name()),
            Self::Unknown(raw) => write!(f, "unknown datatype {raw:#x}"),
        }
    }
}

impl From<DatatypeName> for String {
    fn from(d: DatatypeName) -> String {
        d.to_string()
    }
}

impl TryFrom<String> for DatatypeName {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        if let Some(d) = Datatype::ALL.iter().find(|d| d.mpi_name() == text) {
            return Ok(Self::Known(*d));
        }
        text.strip_prefix("unknown datatype 0x")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .map(Self::Unknown)
            .ok_or_else(|| format!("not a datatype: {text}"))
    }
}

/// One of the standard's named constants of a kind (scope, binding,
/// verbosity), or a value that is none of them.
macro_rules! named_constants {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(into = "String", try_from = "String")]
        pub enum $name {
            $($variant,)*
            /// A value that is none of the constants.
            Unknown(i32),
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$(Self::$variant,)*];

            pub fn as_str(self) -> std::borrow::Cow<'static, str> {
                match self {
                    $(Self::$variant => $text.into(),)*
                    Self::Unknown(raw) => format!("unknown ({raw})").into(),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.as_str())
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.as_str().into_owned()
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(text: String) -> Result<Self, String> {
                $(if text == $text { return Ok(Self::$variant); })*
                text.strip_prefix("unknown (")
                    .and_then(|t| t.strip_suffix(')'))
                    .and_then(|t| t.parse().ok())
                    .map(Self::Unknown)
                    .ok_or_else(|| format!("not a {}: {text}", stringify!($name)))
            }
        }
    };
}

named_constants! {
    /// MPI_T_SCOPE_*: when and where a variable may be changed.
    Scope {
        Constant = "constant",
        Readonly = "readonly",
        Local = "local",
        Group = "group",
        GroupEq = "group_eq",
        All = "all",
        AllEq = "all_eq",
    }
}

named_constants! {
    /// MPI_T_BIND_*: the kind of MPI object a variable belongs to.
    Bind {
        NoObject = "no_object",
        Comm = "MPI_COMM",
        Datatype = "MPI_DATATYPE",
        Errhandler = "MPI_ERRHANDLER",
        File = "MPI_FILE",
        Group = "MPI_GROUP",
        Op = "MPI_OP",
        Request = "MPI_REQUEST",
        Win = "MPI_WIN",
        Message = "MPI_MESSAGE",
        Info = "MPI_INFO",
    }
}

named_constants! {
    /// MPI_T_VERBOSITY_*, from user/basic (level 1) to mpidev/all (9).
    Verbosity {
        UserBasic = "user/basic",
        UserDetail = "user/detail",
        UserAll = "user/all",
        TunerBasic = "tuner/basic",
        TunerDetail = "tuner/detail",
        TunerAll = "tuner/all",
        MpidevBasic = "mpidev/basic",
        MpidevDetail = "mpidev/detail",
        MpidevAll = "mpidev/all",
    }
}

impl Scope {
    /// Whether the standard says the variable cannot be written.
    pub fn read_only(self) -> bool {
        matches!(self, Self::Constant | Self::Readonly)
    }
}

impl Verbosity {
    /// 1 (user/basic) to 9 (mpidev/all); unknown values count as 9 so that
    /// a filter never hides them silently below its level.
    pub fn level(self) -> u8 {
        match Self::ALL.iter().position(|v| *v == self) {
            Some(i) => i as u8 + 1,
            None => 9,
        }
    }

    /// A level as the user names it: 1..9 or `user/basic`, `tuner_all`...
    pub fn parse_level(text: &str) -> Option<u8> {
        if let Ok(n) = text.parse::<u8>() {
            return (1..=9).contains(&n).then_some(n);
        }
        let wanted = text.to_ascii_lowercase().replace(['_', '-'], "/");
        Self::ALL
            .iter()
            .find(|v| v.as_str() == wanted)
            .map(|v| v.level())
    }
}

/// One element of a value. Integers compare by value whatever their
/// signedness (JSON does not keep it).
#[derive(Debug, Clone, Copy)]
pub enum Number {
    Bool(bool),
    Signed(i64),
    Unsigned(u64),
    Float(f64),
}

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        match (*self, *other) {
            (Self::Bool(a), Self::Bool(b)) => a == b,
            (Self::Signed(a), Self::Signed(b)) => a == b,
            (Self::Unsigned(a), Self::Unsigned(b)) => a == b,
            (Self::Signed(a), Self::Unsigned(b)) | (Self::Unsigned(b), Self::Signed(a)) => {
                u64::try_from(a) == Ok(b)
            }
            (Self::Float(a), Self::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            _ => false,
        }
    }
}

impl Serialize for Number {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Self::Bool(b) => s.serialize_bool(b),
            Self::Signed(i) => s.serialize_i64(i),
            Self::Unsigned(u) => s.serialize_u64(u),
            Self::Float(x) if x.is_finite() => s.serialize_f64(x),
            // JSON has no NaN or infinity.
            Self::Float(x) => s.serialize_str(&x.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Signed(i64),
            Unsigned(u64),
            Float(f64),
            Special(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(b) => Ok(Self::Bool(b)),
            Raw::Signed(i) => Ok(Self::Signed(i)),
            Raw::Unsigned(u) => Ok(Self::Unsigned(u)),
            Raw::Float(x) => Ok(Self::Float(x)),
            Raw::Special(t) => t
                .parse::<f64>()
                .ok()
                .filter(|x| !x.is_finite())
                .map(Self::Float)
                .ok_or_else(|| serde::de::Error::custom(format!("not a number: {t}"))),
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bool(b) => write!(f, "{b}"),
            Self::Signed(i) => write!(f, "{i}"),
            Self::Unsigned(u) => write!(f, "{u}"),
            Self::Float(x) => write!(f, "{x}"),
        }
    }
}

impl Number {
    /// As an enumeration item's value (MPI_INT), if it is an integer.
    pub fn as_item_value(&self) -> Option<i64> {
        match *self {
            Self::Bool(b) => Some(i64::from(b)),
            Self::Signed(i) => Some(i),
            Self::Unsigned(u) => i64::try_from(u).ok(),
            Self::Float(_) => None,
        }
    }
}

/// The value of a variable: its elements, or its text for MPI_CHAR. JSON
/// shows one element as a scalar, several as an array.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Numbers(Vec<Number>),
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(t) => f.write_str(t),
            Self::Numbers(n) => {
                for (i, number) in n.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{number}")?;
                }
                Ok(())
            }
        }
    }
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(t) => s.serialize_str(t),
            Self::Numbers(n) if n.len() == 1 => n[0].serialize(s),
            Self::Numbers(n) => n.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            One(Number),
            Many(Vec<Number>),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Text(t) => Self::Text(t),
            Raw::One(n) => Self::Numbers(vec![n]),
            Raw::Many(n) => Self::Numbers(n),
        })
    }
}

impl Value {
    /// The single integer a one-element value holds (for enumerations).
    pub fn single_item_value(&self) -> Option<i64> {
        match self {
            Self::Numbers(n) if n.len() == 1 => n[0].as_item_value(),
            _ => None,
        }
    }
}

/// An enumeration (MPI_T_enum) and its items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enumeration {
    pub name: String,
    pub items: Vec<EnumItem>,
}

impl Enumeration {
    /// `name (value), ...`.
    pub fn item_list(&self) -> String {
        let items: Vec<String> = self
            .items
            .iter()
            .map(|i| format!("{} ({})", i.name, i.value))
            .collect();
        items.join(", ")
    }

    /// What `value` names: its item, or, for an enumeration of bit flags
    /// (every item a single bit, as Open MPI's flag enumerations are), the
    /// items of its bits joined by commas when every bit has one.
    pub fn name_of(&self, value: &Value) -> Option<String> {
        if let Some(name) = self.item_name(value) {
            return Some(name.to_owned());
        }
        let v = value.single_item_value().filter(|v| *v > 0)?;
        let flags = self
            .items
            .iter()
            .all(|i| i.value > 0 && (i.value as u32).is_power_of_two());
        let covered = self.items.iter().fold(0i64, |acc, i| {
            if v & i64::from(i.value) != 0 {
                acc | i64::from(i.value)
            } else {
                acc
            }
        });
        if !flags || covered != v {
            return None;
        }
        let names: Vec<&str> = self
            .items
            .iter()
            .filter(|i| v & i64::from(i.value) != 0)
            .map(|i| i.name.as_str())
            .collect();
        Some(names.join(","))
    }

    /// The name of the item with `value`, if there is one.
    pub fn item_name(&self, value: &Value) -> Option<&str> {
        let v = value.single_item_value()?;
        self.items
            .iter()
            .find(|item| i64::from(item.value) == v)
            .map(|item| item.name.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnumItem {
    pub value: i32,
    pub name: String,
}

/// One control variable as MPI_T describes it, with its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    pub index: i32,
    pub name: String,
    pub description: String,
    pub datatype: DatatypeName,
    pub verbosity: Verbosity,
    pub scope: Scope,
    pub bind: Bind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enumeration: Option<Enumeration>,
    /// Elements, from MPI_T_cvar_handle_alloc (unbound variables only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The enumeration item the value names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_name: Option<String>,
    /// Why there is no value: bound to an object, or an MPI_T error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_value: Option<String>,
}

impl Variable {
    /// The value as the table shows it: an enumeration's item name with
    /// its number.
    pub fn value_text(&self) -> Option<String> {
        let value = self.value.as_ref()?;
        Some(describe_value(value, self.value_name.as_deref()))
    }
}

/// A value with the enumeration item it names, as text.
pub fn describe_value(value: &Value, item: Option<&str>) -> String {
    match (value, item) {
        (Value::Numbers(n), _) if matches!(n.as_slice(), [Number::Bool(_)]) => value.to_string(),
        (_, Some(name)) => format!("{name} ({value})"),
        (_, None) => value.to_string(),
    }
}

/// An MPI_T call that failed for one variable. The listing goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariableError {
    pub index: i32,
    /// Unknown when MPI_T_cvar_get_info itself failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub call: String,
    pub code: i32,
    /// The MPI_T_ERR_* name of the code, or "not an MPI_T error code".
    pub error: String,
}

impl fmt::Display for VariableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cvar {}", self.index)?;
        if let Some(name) = &self.name {
            write!(f, " ({name})")?;
        }
        write!(f, ": {} returned {} ({})", self.call, self.error, self.code)
    }
}

/// An MPI implementation family, by ABI (what each has is in `abi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    OpenMpi,
    Mpich,
}

/// Every control variable of a library, as its helper listed them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    pub schema_version: u32,
    pub library: String,
    pub family: Family,
    /// MPI_Get_library_version, first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_version: Option<String>,
    /// MPI_T_cvar_get_num.
    pub num_cvars: i32,
    pub variables: Vec<Variable>,
    pub errors: Vec<VariableError>,
    /// Environment variables of the MPI's own that were removed before the
    /// library was loaded, so that values are its defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_cleared: Vec<String>,
}

impl Listing {
    pub fn find(&self, name: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == name)
    }
}

/// What narrows a listing: a name/description pattern and a verbosity.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub pattern: Option<String>,
    /// Highest verbosity level shown (1..9); None shows all.
    pub max_level: Option<u8>,
}

impl Filter {
    /// Case-insensitive; `*` and `?` are wildcards over the whole name, and
    /// a pattern without them matches anywhere in the name or description.
    pub fn matches(&self, name: &str, description: &str, verbosity: Verbosity) -> bool {
        if let Some(max) = self.max_level {
            if verbosity.level() > max {
                return false;
            }
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let pattern = pattern.to_lowercase();
        if pattern.contains(['*', '?']) {
            glob(&pattern, &name.to_lowercase())
        } else {
            name.to_lowercase().contains(&pattern) || description.to_lowercase().contains(&pattern)
        }
    }
}

/// `*` any run of characters, `?` one character.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_bytes() {
        let v = Datatype::Int.decode(&(-5i32).to_ne_bytes(), 1);
        assert_eq!(v, Value::Numbers(vec![Number::Signed(-5)]));
        assert_eq!(
            Datatype::Int.encode(&v, 1).unwrap(),
            (-5i32).to_ne_bytes().to_vec()
        );
        let mut range = Vec::new();
        range.extend_from_slice(&3i32.to_ne_bytes());
        range.extend_from_slice(&9i32.to_ne_bytes());
        assert_eq!(Datatype::Int.decode(&range, 2).to_string(), "3,9");
        assert_eq!(
            Datatype::UnsignedLong
                .decode(&u64::MAX.to_ne_bytes(), 1)
                .to_string(),
            u64::MAX.to_string()
        );
        assert_eq!(
            Datatype::Double
                .decode(&0.5f64.to_ne_bytes(), 1)
                .to_string(),
            "0.5"
        );
        assert_eq!(Datatype::CBool.decode(&[1], 1).to_string(), "true");
        assert_eq!(Datatype::Char.decode(b"abc\0zzz", 7).to_string(), "abc");
        // A string the count cuts off is taken as far as the count goes.
        assert_eq!(Datatype::Char.decode(b"abcdef", 3).to_string(), "abc");
    }

    #[test]
    fn encoding_refuses_what_does_not_fit() {
        let big = Value::Numbers(vec![Number::Signed(1 << 40)]);
        assert!(Datatype::Int.encode(&big, 1).is_none());
        assert!(Datatype::Long.encode(&big, 1).is_some());
        let negative = Value::Numbers(vec![Number::Signed(-1)]);
        assert!(Datatype::Unsigned.encode(&negative, 1).is_none());
        assert!(Datatype::Int.encode(&Value::Text("x".into()), 1).is_none());
        // A string needs room for its NUL within the count.
        assert!(Datatype::Char
            .encode(&Value::Text("abc".into()), 3)
            .is_none());
        assert_eq!(
            Datatype::Char
                .encode(&Value::Text("abc".into()), 8)
                .unwrap(),
            b"abc\0\0\0\0\0".to_vec()
        );
    }

    #[test]
    fn parsing_takes_enumeration_names_and_booleans() {
        let e = Enumeration {
            name: "protocol".into(),
            items: vec![
                EnumItem {
                    value: 0,
                    name: "eager".into(),
                },
                EnumItem {
                    value: 1,
                    name: "rndv".into(),
                },
            ],
        };
        assert_eq!(
            Datatype::Int.parse("RNDV", Some(&e)).unwrap(),
            Value::Numbers(vec![Number::Signed(1)])
        );
        assert_eq!(
            Datatype::CBool.parse("false", None).unwrap(),
            Value::Numbers(vec![Number::Bool(false)])
        );
        assert!(Datatype::Unsigned.parse("-1", None).is_err());
        assert!(Datatype::Int.parse("lots", Some(&e)).is_err());
        assert_eq!(Datatype::Int.parse("1,2", None).unwrap().to_string(), "1,2");
    }

    #[test]
    fn json_of_values_is_natural() {
        let one = Value::Numbers(vec![Number::Signed(4096)]);
        assert_eq!(serde_json::to_string(&one).unwrap(), "4096");
        let two = Value::Numbers(vec![Number::Signed(1), Number::Signed(2)]);
        assert_eq!(serde_json::to_string(&two).unwrap(), "[1,2]");
        let text = Value::Text("sm".into());
        assert_eq!(serde_json::to_string(&text).unwrap(), "\"sm\"");
        for v in [one, two, text] {
            let back: Value = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
            assert_eq!(back, v);
        }
        let flags = Enumeration {
            name: "flags".into(),
            items: vec![
                EnumItem {
                    value: 1,
                    name: "send".into(),
                },
                EnumItem {
                    value: 4,
                    name: "get".into(),
                },
            ],
        };
        let v = |n| Value::Numbers(vec![Number::Unsigned(n)]);
        assert_eq!(flags.name_of(&v(5)).as_deref(), Some("send,get"));
        assert_eq!(flags.name_of(&v(4)).as_deref(), Some("get"));
        assert_eq!(flags.name_of(&v(7)), None);
        let name: DatatypeName = serde_json::from_str("\"MPI_UNSIGNED_LONG\"").unwrap();
        assert_eq!(name, DatatypeName::Known(Datatype::UnsignedLong));
        let scope: Scope = serde_json::from_str("\"unknown (77)\"").unwrap();
        assert_eq!(scope, Scope::Unknown(77));
    }

    #[test]
    fn filters_match_names_descriptions_and_levels() {
        let f = Filter {
            pattern: Some("EAGER".into()),
            max_level: Some(4),
        };
        assert!(f.matches("btl_vader_eager_limit", "", Verbosity::TunerBasic));
        assert!(!f.matches("btl_vader_eager_limit", "", Verbosity::TunerDetail));
        assert!(f.matches("x", "the eager protocol", Verbosity::UserBasic));
        let g = Filter {
            pattern: Some("btl_*_limit".into()),
            max_level: None,
        };
        assert!(g.matches("btl_vader_eager_limit", "", Verbosity::MpidevAll));
        assert!(!g.matches("btl_vader_eager_limits", "", Verbosity::MpidevAll));
        assert!(!g.matches("xbtl_vader_limit", "", Verbosity::MpidevAll));
        assert_eq!(Verbosity::parse_level("tuner_all"), Some(6));
        assert_eq!(Verbosity::parse_level("9"), Some(9));
        assert_eq!(Verbosity::parse_level("10"), None);
    }
}
