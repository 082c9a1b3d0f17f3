//! Reading saved reports back: what `ReportData::from_json` accepts and how it says no.

use cabprof::report::{ReportData, ReportError, SCHEMA};

#[test]
fn a_report_round_trips_and_errors_name_what_failed() {
    let data = ReportData {
        schema: SCHEMA.into(),
        ..ReportData::default()
    };
    assert_eq!(ReportData::from_json(&data.json()).unwrap(), data);

    let e = ReportData::from_json("{ \"schema\": ").unwrap_err();
    assert!(matches!(e, ReportError::NotAReport(_)), "{e:?}");
    assert!(e.to_string().starts_with("not a cabprof report: "), "{e}");
    assert!(std::error::Error::source(&e).is_some());

    let other = data.json().replace(SCHEMA, "cabprof-report/99");
    match ReportData::from_json(&other).unwrap_err() {
        ReportError::UnsupportedSchema { found } => assert_eq!(found, "cabprof-report/99"),
        e => panic!("{e:?}"),
    }
}
