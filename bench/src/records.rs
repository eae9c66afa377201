//! The CSV files the bench programs write, through the `csv` crate: a field that holds a comma,
//! a quote or a line break is quoted as RFC 4180 says, so that a name like
//! `default (d + U[0, d/2))` stays one field.

use std::error::Error;

/// `header`, then `rows`, as CSV text. Every row must have as many fields as the header: the
/// writer refuses a row of another length rather than write a file that does not parse.
pub fn csv<S: AsRef<[u8]>>(
    header: &[&str],
    rows: impl IntoIterator<Item = Vec<S>>,
) -> Result<String, Box<dyn Error>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(header)?;
    for row in rows {
        writer.write_record(&row)?;
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes)?)
}

/// `text` read back as CSV: the header and every record, each field unquoted. Errors if a
/// record's field count differs from the header's.
pub fn read(text: &str) -> Result<(Vec<String>, Vec<Vec<String>>), csv::Error> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers()?.iter().map(str::to_owned).collect();
    let records = reader
        .records()
        .map(|record| record.map(|r| r.iter().map(str::to_owned).collect()))
        .collect::<Result<_, _>>()?;
    Ok((header, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_with_a_comma_or_a_quote_is_quoted_and_reads_back() {
        let text = csv(
            &["strategy", "calls"],
            [
                vec!["default (d + U[0, d/2))", "12.5"],
                vec!["say \"hi\"", "1"],
            ],
        )
        .unwrap();
        assert_eq!(
            text,
            "strategy,calls\n\"default (d + U[0, d/2))\",12.5\n\"say \"\"hi\"\"\",1\n"
        );
        let (header, records) = read(&text).unwrap();
        assert_eq!(header, ["strategy", "calls"]);
        assert_eq!(records[0], ["default (d + U[0, d/2))", "12.5"]);
        assert_eq!(records[1], ["say \"hi\"", "1"]);
    }

    #[test]
    fn a_row_of_another_length_is_refused() {
        assert!(csv(&["a", "b"], [vec!["1", "2", "3"]]).is_err());
        assert!(read("a,b\n1,2,3\n").is_err());
    }
}
