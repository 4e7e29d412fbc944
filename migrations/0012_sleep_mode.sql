ALTER TABLE "deployments" ADD COLUMN "asleep_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "last_request_at" timestamp with time zone;--> statement-breakpoint
-- Falling asleep and being woken change what the edge does for the project (hold and wake, or proxy).
DROP TRIGGER deployments_edge_notify_update ON deployments;
--> statement-breakpoint
CREATE TRIGGER deployments_edge_notify_update AFTER UPDATE ON deployments
  FOR EACH ROW WHEN (OLD.current IS DISTINCT FROM NEW.current OR OLD.port IS DISTINCT FROM NEW.port OR OLD.served_by IS DISTINCT FROM NEW.served_by OR OLD.crashed_at IS DISTINCT FROM NEW.crashed_at OR OLD.asleep_at IS DISTINCT FROM NEW.asleep_at)
  EXECUTE FUNCTION workspace_edge_notify_project_rows();
