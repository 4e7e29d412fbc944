-- The run holding a transfer (set at each claim): bookkeeping writes are conditioned on it, so a run whose lease was taken over writes nothing more.
-- Rows of earlier runs have none; the next claim sets it.
ALTER TABLE "project_transfers" ADD COLUMN "run_id" text;