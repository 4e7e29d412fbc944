import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectsScopingSuite } from "../suites/projects-scoping.suite";

projectsScopingSuite(useHarness(pgliteHarness));
