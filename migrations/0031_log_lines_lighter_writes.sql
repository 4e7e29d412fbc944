ALTER TABLE "log_lines" DROP CONSTRAINT "log_lines_project_id_projects_id_fk";
--> statement-breakpoint
ALTER TABLE "log_lines" DROP CONSTRAINT "log_lines_org_id_organizations_id_fk";
--> statement-breakpoint
ALTER TABLE "log_lines" DROP CONSTRAINT "log_lines_deployment_id_deployments_id_fk";
--> statement-breakpoint
DROP INDEX "log_lines_at_idx";--> statement-breakpoint
CREATE INDEX "log_lines_at_idx" ON "log_lines" USING brin ("at");--> statement-breakpoint
-- The cascades the foreign keys gave, as triggers: a project's or deployment's lines go with it (an
-- organization's projects cascade from it, and with them their lines). Nothing is checked per inserted
-- line any more; see shared/db/schema/logs.ts for why.
CREATE OR REPLACE FUNCTION workspace_delete_project_log_lines() RETURNS trigger AS $$
BEGIN
  DELETE FROM log_lines WHERE project_id = OLD.id;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;--> statement-breakpoint
CREATE OR REPLACE FUNCTION workspace_delete_deployment_log_lines() RETURNS trigger AS $$
BEGIN
  DELETE FROM log_lines WHERE deployment_id = OLD.id;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;--> statement-breakpoint
CREATE TRIGGER projects_delete_log_lines AFTER DELETE ON projects
  FOR EACH ROW EXECUTE FUNCTION workspace_delete_project_log_lines();--> statement-breakpoint
CREATE TRIGGER deployments_delete_log_lines AFTER DELETE ON deployments
  FOR EACH ROW EXECUTE FUNCTION workspace_delete_deployment_log_lines();
