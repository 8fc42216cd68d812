//! A report as an object (`runtime.profiling.Report`) and the `runtime.profiling.*` globals.

use super::*;

/// A report as an object (TVM's `runtime.profiling.Report`), for the debug graph executor's
/// `profile` and the `runtime.profiling.*` globals.
pub struct ReportObj(pub Report);

// SAFETY: no public cell: the report is only read through tvmrt's functions; it takes the
// generic object index as the type is private to tvmrt.
unsafe impl ObjectPayload for ReportObj {
    const TYPE_INDEX: i32 = type_index::OBJECT;
}

/// A report object.
pub fn new_report(report: Report) -> ObjectRef {
    new_object(ReportObj(report))
}

/// The report inside an argument, or a `TypeError` naming `what`.
pub fn report_arg(v: &AnyView<'_>, what: &str) -> Result<ObjectRef> {
    let obj = v
        .as_object()
        .filter(|o| o.downcast_ref::<ReportObj>().is_some())
        .ok_or_else(|| v.type_mismatch(what, "runtime.profiling.Report"))?;
    Ok(obj)
}

fn with_report<T>(args: &[AnyView<'_>], f: impl FnOnce(&Report) -> T) -> Result<T> {
    let v = args
        .first()
        .ok_or_else(|| Error::type_error("expected a runtime.profiling.Report argument"))?;
    let obj = report_arg(v, "report")?;
    let r = obj
        .downcast_ref::<ReportObj>()
        .expect("checked by report_arg");
    Ok(f(&r.0))
}

fn flag(args: &[AnyView<'_>], i: usize, default: bool) -> Result<bool> {
    match args.get(i) {
        None => Ok(default),
        Some(v) => v
            .as_bool()
            .or_else(|| v.as_i64().map(|n| n != 0))
            .ok_or_else(|| v.type_mismatch("flag", "bool")),
    }
}

/// `runtime.profiling.AsTable(report, sort, aggregate, col_sums)`, `AsCSV`, `AsJSON`,
/// `FromJSON`, as TVM registers them.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "runtime.profiling.AsTable",
            Function::from_fn(|args| {
                let (sort, agg, sums) = (
                    flag(args, 1, true)?,
                    flag(args, 2, true)?,
                    flag(args, 3, true)?,
                );
                Ok(Any::from(with_report(args, |r| {
                    r.to_table(sort, agg, sums)
                })?))
            }),
        ),
        (
            "runtime.profiling.AsCSV",
            Function::from_fn(|args| Ok(Any::from(with_report(args, Report::to_csv)?))),
        ),
        (
            "runtime.profiling.AsJSON",
            Function::from_fn(|args| Ok(Any::from(with_report(args, Report::to_json)?))),
        ),
        (
            "runtime.profiling.FromJSON",
            Function::from_fn(|args| {
                let text = args
                    .first()
                    .ok_or_else(|| Error::type_error("FromJSON expects the report's JSON"))?
                    .expect_str("json")?;
                Ok(Any::from_object(new_report(Report::from_json(text)?)))
            }),
        ),
    ]
}
