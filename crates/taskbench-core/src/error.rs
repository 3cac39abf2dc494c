//! Errors in a benchmark's configuration. Each message names the flag or graph at fault and
//! follows the reference's wording where the reference has one.

use thiserror::Error;

/// A configuration that cannot be run. `Display` gives one line without the `error: ` prefix.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// A flag that takes a value came last.
    #[error("Flag \"{0}\" requires an argument")]
    MissingArgument(String),
    /// A value that does not parse as the flag's type.
    #[error("Invalid flag \"{flag} {value}\": expected {expected}")]
    BadValue {
        /// The flag.
        flag: String,
        /// The value given.
        value: String,
        /// What the flag takes.
        expected: String,
    },
    /// A value outside the flag's range, shown as the reference shows it.
    #[error("Invalid flag \"{flag} {shown}\" must be {rule}")]
    OutOfRange {
        /// The flag.
        flag: String,
        /// The value, as the reference prints it.
        shown: String,
        /// The range it must be in, in words.
        rule: String,
    },
    /// A flag neither Task Bench nor the system knows.
    #[error("Unknown flag \"{0}\" (see -h for the flags taskbench accepts)")]
    UnknownFlag(String),
    /// `-period` given to a type without dependence-set periods.
    #[error("Graph type \"{0}\" does not support user-configurable period")]
    PeriodNotSupported(String),
    /// `-period` larger than the type allows.
    #[error("Graph type \"{ty}\" requires a period that is at most {max}")]
    PeriodTooLarge {
        /// The dependence type.
        ty: String,
        /// Its largest period.
        max: i64,
    },
    /// A type that needs a period was given 0.
    #[error("Graph type \"{0}\" requires a period that is at least 1")]
    PeriodRequired(String),
    /// A width for which the type's dependencies are ill-defined.
    #[error("Graph type \"{ty}\" requires a width of at least {min} (got {width}): {why}")]
    WidthTooSmall {
        /// The dependence type.
        ty: String,
        /// The smallest width it allows here.
        min: i64,
        /// The width given.
        width: i64,
        /// Why, in words.
        why: String,
    },
    /// A type or kernel the reference does not implement, or this build does not support.
    #[error("{0}")]
    NotSupported(String),
    /// A count or size that does not fit the report's counters or the machine.
    #[error("{0}")]
    TooLarge(String),
    /// The graph check found a dependency listed twice or a reverse dependency that does not
    /// mirror a forward one.
    #[error("Graph {graph} fails validation at timestep {timestep}, point {point}: {what}")]
    BadGraph {
        /// 0-based graph index.
        graph: i64,
        /// The timestep.
        timestep: i64,
        /// The point.
        point: i64,
        /// What is wrong with its dependencies.
        what: String,
    },
}
