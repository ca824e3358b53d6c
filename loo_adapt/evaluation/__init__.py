"""Everything made from a finished LOO result: metrics, plots, reports, arviz objects."""
