"""`linkscope check --junit FILE`: the items as JUnit XML (one testcase per item, failure for FAIL)."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from linkscope.check.items import CheckItem


def junit_xml(items: list[CheckItem], suite: str = "linkscope check", classnames: list[str] | None = None) -> str:
    """One testsuite; FAIL -> <failure>, SKIP -> <skipped>, WARN -> system-out with the fix. `classnames` (one per
    item) groups a fleet's test cases by node: `linkscope.check.<hostname>`."""
    root = ET.Element("testsuite", name=suite, tests=str(len(items)),
                      failures=str(sum(i.status == "FAIL" for i in items)),
                      skipped=str(sum(i.status == "SKIP" for i in items)))
    for index, item in enumerate(items):
        classname = classnames[index] if classnames else "linkscope.check"
        case = ET.SubElement(root, "testcase", classname=classname, name=item.name)
        text = f"measured {item.measured} {item.unit}, expected {item.expected} ({item.source})"
        if item.status == "FAIL":
            ET.SubElement(case, "failure", message=item.fix or text).text = text
        elif item.status == "SKIP":
            ET.SubElement(case, "skipped", message=item.fix)
        elif item.status == "WARN":
            ET.SubElement(case, "system-out").text = f"WARN: {text}; {item.fix}"
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
