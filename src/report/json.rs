//! The JSON rendering: the data model as is (schema in the [`report`](super) module docs).

use crate::model::ReportData;

impl ReportData {
    /// Pretty-printed JSON; [`from_json`](Self::from_json) reads it back.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report data always serializes")
    }
}
