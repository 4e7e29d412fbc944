import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { notificationsSuite } from "../suites/notifications.suite";

notificationsSuite(useHarness(workerHarness));
