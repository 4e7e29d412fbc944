import { useHarness } from "../support/harness";
import { postgresHarnessWith } from "../support/node-harness";
import { nodeNotificationsEnv } from "../support/notifications-env-node";
import { notificationsDeliverySuite } from "../suites/notifications-delivery.suite";

const env = nodeNotificationsEnv(postgresHarnessWith);
notificationsDeliverySuite(useHarness(env.harness), env);
