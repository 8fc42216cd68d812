//! A report as TVM prints it: `AsJSON` (and back, `FromJSON`), `AsCSV`, `AsTable`.

use super::*;
use crate::cold_sort::ordered;

fn row_to_json(row: &Row) -> Value {
    Value::Object(ordered(row.iter().map(|(k, v)| (k.clone(), v.to_json()))))
}

fn row_from_json(v: &Value, what: &str) -> Result<Row> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::value(format!("profiling report: `{what}` must be an object")))?;
    let mut row = Row::new();
    for (k, x) in obj {
        row.insert(k.clone(), Metric::from_json(x, &format!("{what}.{k}"))?);
    }
    Ok(row)
}

impl Report {
    /// TVM's `AsJSON`.
    pub fn to_json(&self) -> String {
        let v = serde_json::json!({
            "calls": self.calls.iter().map(row_to_json).collect::<Vec<_>>(),
            "device_metrics": Value::Object(ordered(
                self.device_metrics
                    .iter()
                    .map(|(k, r)| (k.clone(), row_to_json(r)))
            )),
            "configuration": row_to_json(&self.configuration),
        });
        v.to_string()
    }

    /// TVM's `Report::FromJSON`.
    pub fn from_json(text: &str) -> Result<Report> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::value(format!("profiling report: not JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| Error::value("profiling report: the top level must be an object"))?;
        let mut r = Report::default();
        if let Some(calls) = obj.get("calls") {
            let calls = calls
                .as_array()
                .ok_or_else(|| Error::value("profiling report: `calls` must be an array"))?;
            for (i, c) in calls.iter().enumerate() {
                r.calls.push(row_from_json(c, &format!("calls[{i}]"))?);
            }
        }
        if let Some(devs) = obj.get("device_metrics") {
            let devs = devs.as_object().ok_or_else(|| {
                Error::value("profiling report: `device_metrics` must be an object")
            })?;
            for (k, d) in devs {
                r.device_metrics
                    .insert(k.clone(), row_from_json(d, &format!("device_metrics.{k}"))?);
            }
        }
        if let Some(c) = obj.get("configuration") {
            r.configuration = row_from_json(c, "configuration")?;
        }
        Ok(r)
    }

    /// TVM's `AsCSV`: every call, one column per metric name (sorted), strings quoted.
    pub fn to_csv(&self) -> String {
        let headers: std::collections::BTreeSet<&String> =
            ordered(self.calls.iter().flat_map(|r| r.keys()));
        let mut s = headers
            .iter()
            .map(|h| h.as_str())
            .collect::<Vec<_>>()
            .join(",");
        s.push('\n');
        for row in &self.calls {
            let cells: Vec<String> = headers
                .iter()
                .map(|h| match row.get(*h) {
                    Some(Metric::Str(t)) => format!("\"{t}\""),
                    Some(Metric::Duration(v) | Metric::Percent(v) | Metric::Ratio(v)) => {
                        v.to_string()
                    }
                    Some(Metric::Count(n)) => n.to_string(),
                    None => String::new(),
                })
                .collect();
            s.push_str(&cells.join(","));
            s.push('\n');
        }
        s
    }

    /// TVM's `AsTable(sort, aggregate, compute_col_sums)`: calls aggregated by kernel (its hash
    /// when it has one), argument shapes and device; sorted by duration; a "Sum" row; a "Total"
    /// row per device; then the configuration.
    pub fn to_table(&self, sort: bool, aggregate_calls: bool, col_sums: bool) -> String {
        let mut rows: Vec<Row> = if aggregate_calls {
            let mut order: Vec<String> = Vec::new();
            let mut groups: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
            for call in &self.calls {
                let text = |k: &str| match call.get(k) {
                    Some(Metric::Str(s)) => s.clone(),
                    _ => String::new(),
                };
                let mut key = match call.get("Hash") {
                    Some(Metric::Str(h)) => h.clone(),
                    _ => text("Name"),
                };
                key.push_str(&text("Argument Shapes"));
                key.push_str(&text("Device"));
                if !groups.contains_key(&key) {
                    order.push(key.clone());
                }
                groups.entry(key).or_default().push(call);
            }
            order
                .iter()
                .map(|k| {
                    let members = &groups[k];
                    let names: std::collections::BTreeSet<&String> =
                        ordered(members.iter().flat_map(|r| r.keys()));
                    ordered(names.into_iter().map(|name| {
                        let values: Vec<&Metric> =
                            members.iter().filter_map(|r| r.get(name)).collect();
                        (name.clone(), aggregate(&values))
                    }))
                })
                .collect()
        } else {
            self.calls.clone()
        };
        let duration = |r: &Row| r.get("Duration (us)").and_then(Metric::microseconds);
        if sort {
            crate::cold_sort::sort_by(&mut rows, |a, b| {
                duration(b)
                    .unwrap_or(0.0)
                    .partial_cmp(&duration(a).unwrap_or(0.0))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        }
        if col_sums {
            let mut sums = Row::new();
            for row in &rows {
                for (k, v) in row {
                    let next = match (sums.get(k), v) {
                        (_, Metric::Ratio(_) | Metric::Str(_)) => continue,
                        (Some(prev), v) => aggregate(&[prev, v]),
                        (None, v) => v.clone(),
                    };
                    sums.insert(k.clone(), next);
                }
            }
            sums.insert("Name".into(), Metric::Str("Sum".into()));
            let mut sep = Row::new();
            sep.insert("Name".into(), Metric::Str("----------".into()));
            rows.push(sep);
            rows.push(sums);
        }
        for metrics in self.device_metrics.values() {
            let mut total = metrics.clone();
            total.insert("Name".into(), Metric::Str("Total".into()));
            rows.push(total);
        }
        let mut headers: Vec<String> = [
            "Name",
            "Duration (us)",
            "Percent",
            "Device",
            "Count",
            "Argument Shapes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let extra: std::collections::BTreeSet<&String> = ordered(
            rows.iter()
                .flat_map(|r| r.keys())
                .filter(|k| !headers.contains(k)),
        );
        let extra: Vec<String> = extra.into_iter().cloned().collect();
        headers.extend(extra);
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                headers
                    .iter()
                    .map(|h| r.get(h).map(Metric::printed).unwrap_or_default())
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| cells.iter().map(|r| r[i].len()).fold(h.len(), usize::max))
            .collect();
        let mut s = String::new();
        for line in std::iter::once(&headers).chain(cells.iter()) {
            for (i, cell) in line.iter().enumerate() {
                if i == 0 {
                    let _ = write!(s, "{cell:<w$}  ", w = widths[i]);
                } else {
                    let _ = write!(s, "{cell:>w$}  ", w = widths[i]);
                }
            }
            s.push('\n');
        }
        s.push_str("\nConfiguration\n-------------\n");
        for (k, v) in &self.configuration {
            let _ = writeln!(s, "{k}: {}", v.printed());
        }
        s
    }
}
