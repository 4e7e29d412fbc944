import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { projectsScopingSuite } from "../suites/projects-scoping.suite";

projectsScopingSuite(useHarness(postgresHarness));
