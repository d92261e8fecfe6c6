-- An autoscaling worker's slots change (its heartbeats keep slots current);
-- max_slots is the most it may grow to. NULL: a fixed number of slots.

ALTER TABLE workers ADD COLUMN max_slots INTEGER;
