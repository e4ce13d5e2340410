"""Facts every layer shares: errors, names, cancellation, dtypes and tolerances,
versions, process settings, atomic writes, file stamps, literals."""
