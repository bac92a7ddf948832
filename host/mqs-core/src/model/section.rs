//! Reading a [`Section`] back. Serde's derive for an internally tagged
//! enum with a flattened field buffers the whole object twice before it
//! looks at the tag; sections are every communicator list, queue and stack
//! list of every rank, so reading a large job's JSON (the collector tree's
//! parents and front end do, for every rank) spent much of its time there.
//! Our own writer puts the tag first: then the rest of the object is read
//! straight into the variant. An object whose tag comes later (JSON edited
//! by hand or by another tool) is buffered once, as the derive would, and
//! read the same way.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::Section;

/// The tag's key.
const STATUS: &str = "status";

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Ok,
    NotAvailable,
    Error,
}

#[derive(Deserialize)]
struct Reason {
    reason: String,
}

#[derive(Deserialize)]
struct Message {
    message: String,
}

/// The section a status makes of the rest of its object.
fn section_of<'de, T: DeserializeOwned, D: Deserializer<'de>>(
    status: Status,
    rest: D,
) -> Result<Section<T>, D::Error> {
    Ok(match status {
        Status::Ok => Section::Ok {
            value: T::deserialize(rest)?,
        },
        Status::NotAvailable => Section::NotAvailable {
            reason: Reason::deserialize(rest)?.reason,
        },
        Status::Error => Section::Error {
            message: Message::deserialize(rest)?.message,
        },
    })
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Section<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(SectionVisitor(PhantomData))
    }
}

struct SectionVisitor<T>(PhantomData<T>);

impl<'de, T: DeserializeOwned> Visitor<'de> for SectionVisitor<T> {
    type Value = Section<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with a \"status\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Section<T>, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Err(A::Error::missing_field(STATUS));
        };
        if first == STATUS {
            let status: Status = map.next_value()?;
            return section_of(status, MapAccessDeserializer::new(map));
        }
        let mut all = serde_json::Map::new();
        all.insert(first, map.next_value()?);
        while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
            all.insert(key, value);
        }
        let status = all
            .remove(STATUS)
            .ok_or_else(|| A::Error::missing_field(STATUS))?;
        let status = Status::deserialize(status).map_err(A::Error::custom)?;
        section_of(status, serde_json::Value::Object(all)).map_err(A::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CommunicatorList, Section};

    type List = Section<CommunicatorList>;

    fn round_trip(section: &List) -> List {
        serde_json::from_str(&serde_json::to_string(section).expect("written")).expect("read")
    }

    #[test]
    fn every_status_reads_back_as_written() {
        let sections = [
            Section::Ok {
                value: CommunicatorList { list: Vec::new() },
            },
            Section::NotAvailable {
                reason: "no debug info".into(),
            },
            Section::Error {
                message: "read failed".into(),
            },
        ];
        for section in &sections {
            let text = serde_json::to_string(section).expect("written");
            assert!(text.starts_with(r#"{"status":"#), "{text}");
            assert_eq!(&round_trip(section), section);
        }
    }

    #[test]
    fn a_status_that_is_not_first_still_reads() {
        let read: List = serde_json::from_str(r#"{"list":[],"status":"ok"}"#).expect("read");
        assert_eq!(
            read,
            Section::Ok {
                value: CommunicatorList { list: Vec::new() }
            }
        );
        let read: List =
            serde_json::from_str(r#"{"reason":"gone","status":"not_available"}"#).expect("read");
        assert_eq!(
            read,
            Section::NotAvailable {
                reason: "gone".into()
            }
        );
    }

    #[test]
    fn a_missing_or_unknown_status_or_field_is_an_error() {
        for text in [
            r#"{}"#,
            r#"{"list":[]}"#,
            r#"{"status":"maybe","list":[]}"#,
            r#"{"status":"not_available"}"#,
            r#"{"status":"ok"}"#,
            r#"[]"#,
        ] {
            assert!(serde_json::from_str::<List>(text).is_err(), "{text}");
        }
    }
}
