//! The CSV files under `docs/`, which `bench/RESULTS.md` points to, parse as CSV: every record
//! has as many fields as the header. (`docs/occ.csv` once wrote the name `default (d + U[0, d/2))`
//! unquoted, so each of its rows had five fields under a header of four.)

use retry_bench::records;
use std::path::Path;

#[test]
fn every_csv_under_docs_reads_back_with_the_headers_field_count() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut read = Vec::new();
    for entry in std::fs::read_dir(&docs).expect("docs/ beside bench/") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "csv") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a readable CSV");
        let (header, records) =
            records::read(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!records.is_empty(), "{}: no records", path.display());
        assert!(
            records.iter().all(|r| r.len() == header.len()),
            "{}",
            path.display()
        );
        let name = path.file_name().expect("a file name").to_string_lossy();
        if name == "occ.csv" {
            assert!(
                records.iter().any(|r| r[1] == "default (d + U[0, d/2))"),
                "the default strategy, its comma inside one field"
            );
        }
        read.push(name.into_owned());
    }
    read.sort();
    assert_eq!(
        read,
        [
            "amplification.csv",
            "collapse-sweep.csv",
            "collapse.csv",
            "metrics.csv",
            "occ.csv",
            "storm-protection.csv",
            "storm.csv",
            "tail.csv"
        ]
    );
}
