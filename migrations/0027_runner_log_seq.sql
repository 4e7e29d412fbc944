-- Runner protocol (issue 22): the highest log sequence a build server sent per deployment. POST /api/runner/jobs/:id/logs
-- stores only lines above it and raises it in the same transaction, so a retried batch is stored once (lines are numbered
-- per project by log_sequences, which a runner cannot know, so the runner's own numbering is kept here).
ALTER TABLE "deployments" ADD COLUMN "runner_log_seq" bigint DEFAULT 0 NOT NULL;