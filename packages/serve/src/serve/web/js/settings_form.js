// The settings panel: shows a conversation's settings and writes each change back into them.

import { toolsOf } from "./chat_request.js";
import { el } from "./dom.js";

const FIXED_CHOICES = ["auto", "required", "none"];

/** Offer each pasted function by name as a tool choice (a named function forces that call). */
function refreshToolChoices(form, settings) {
  const select = form.elements.tool_choice;
  let names = [];
  try {
    names = toolsOf(settings).map((tool) => tool.function.name).filter(Boolean);
  } catch {
    // the tools text is being typed: the fixed choices stay offered
  }
  const wanted = [...FIXED_CHOICES, ...names];
  if (!wanted.includes(settings.tool_choice)) wanted.push(settings.tool_choice);
  // Rebuilt only when the names change: a rebuild drops an option the user is choosing right now.
  const offered = [...select.options].map((option) => option.value);
  if (offered.join("\n") !== wanted.join("\n")) {
    select.replaceChildren(...wanted.map((name) => el("option", { value: name, text: FIXED_CHOICES.includes(name) ? name : `call ${name}` })));
  }
  select.value = settings.tool_choice;
}

function checkJson(form, error) {
  const problems = [];
  for (const [name, label] of [["json_schema", "The JSON schema"], ["tools", "Tools"]]) {
    const text = form.elements[name].value.trim();
    if (!text) continue;
    try {
      JSON.parse(text);
    } catch (caught) {
      problems.push(`${label} is not valid JSON: ${caught.message}`);
    }
  }
  error.textContent = problems.join(" ");
  error.hidden = problems.length === 0;
}

/** Bind the form to the settings of whichever conversation `current()` answers; `changed()` saves. */
export function bindSettings(form, current, changed) {
  const error = document.getElementById("settings-error");
  form.addEventListener("submit", (event) => event.preventDefault());
  // Text fields are written back at each keystroke ("input"); a select's choice on "change" too,
  // since a choice made through WebDriver (Chromium 156) fires no "input".
  const written = (event) => {
    const field = event.target;
    const settings = current().settings;
    settings[field.name] = field.type === "checkbox" ? field.checked : field.value;
    if (field.name === "tools") refreshToolChoices(form, settings);
    checkJson(form, error);
    changed();
  };
  form.addEventListener("input", written);
  form.addEventListener("change", written);
  return function show(settings) {
    for (const field of form.elements) {
      if (!field.name) continue;
      if (field.type === "checkbox") field.checked = Boolean(settings[field.name]);
      else field.value = settings[field.name] ?? "";
    }
    refreshToolChoices(form, settings);
    checkJson(form, error);
  };
}
