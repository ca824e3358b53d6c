"""LOO estimators: each takes the rows it is asked about and returns an immutable `Estimate`."""
