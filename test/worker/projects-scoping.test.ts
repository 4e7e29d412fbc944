import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { projectsScopingSuite } from "../suites/projects-scoping.suite";

projectsScopingSuite(useHarness(workerHarness));
