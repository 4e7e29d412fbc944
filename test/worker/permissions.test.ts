import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { permissionsSuite } from "../suites/permissions.suite";

permissionsSuite(useHarness(workerHarness));
