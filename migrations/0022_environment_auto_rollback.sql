-- An environment may roll back on its own: after its current app is given up (a crash loop), the previous ready deployment is
-- promoted. Null: the default by kind (on for production, off for previews).
ALTER TABLE "environments" ADD COLUMN "auto_rollback" boolean;