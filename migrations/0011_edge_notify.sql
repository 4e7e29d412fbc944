-- Every change that can alter what the self-hosted edge serves for a project is
-- announced on the `workspace_edge` channel with the project's id, so each
-- adapter process reloads that project's routes (functions/self-hosted/edge).
CREATE OR REPLACE FUNCTION workspace_edge_notify_project_rows() RETURNS trigger AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('workspace_edge', OLD.project_id);
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR OLD.project_id IS DISTINCT FROM NEW.project_id) THEN
    PERFORM pg_notify('workspace_edge', NEW.project_id);
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION workspace_edge_notify_projects() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('workspace_edge', OLD.id);
  ELSE
    PERFORM pg_notify('workspace_edge', NEW.id);
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE TRIGGER projects_edge_notify AFTER INSERT OR DELETE ON projects
  FOR EACH ROW EXECUTE FUNCTION workspace_edge_notify_projects();
--> statement-breakpoint
CREATE TRIGGER projects_edge_notify_update AFTER UPDATE ON projects
  FOR EACH ROW WHEN (OLD.slug IS DISTINCT FROM NEW.slug OR OLD.disabled_at IS DISTINCT FROM NEW.disabled_at OR OLD.sleep_mode IS DISTINCT FROM NEW.sleep_mode)
  EXECUTE FUNCTION workspace_edge_notify_projects();
--> statement-breakpoint
CREATE TRIGGER deployments_edge_notify AFTER DELETE ON deployments
  FOR EACH ROW EXECUTE FUNCTION workspace_edge_notify_project_rows();
--> statement-breakpoint
CREATE TRIGGER deployments_edge_notify_insert AFTER INSERT ON deployments
  FOR EACH ROW WHEN (NEW.current) EXECUTE FUNCTION workspace_edge_notify_project_rows();
--> statement-breakpoint
CREATE TRIGGER deployments_edge_notify_update AFTER UPDATE ON deployments
  FOR EACH ROW WHEN (OLD.current IS DISTINCT FROM NEW.current OR OLD.port IS DISTINCT FROM NEW.port OR OLD.served_by IS DISTINCT FROM NEW.served_by OR OLD.crashed_at IS DISTINCT FROM NEW.crashed_at)
  EXECUTE FUNCTION workspace_edge_notify_project_rows();
--> statement-breakpoint
CREATE TRIGGER domains_edge_notify AFTER INSERT OR UPDATE OR DELETE ON domains
  FOR EACH ROW EXECUTE FUNCTION workspace_edge_notify_project_rows();
--> statement-breakpoint
CREATE TRIGGER environments_edge_notify AFTER INSERT OR UPDATE OR DELETE ON environments
  FOR EACH ROW EXECUTE FUNCTION workspace_edge_notify_project_rows();
--> statement-breakpoint
CREATE TRIGGER route_rules_edge_notify AFTER INSERT OR UPDATE OR DELETE ON route_rules
  FOR EACH ROW EXECUTE FUNCTION workspace_edge_notify_project_rows();
