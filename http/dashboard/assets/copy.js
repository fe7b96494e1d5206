// Copy buttons: an enhancement only. Without script the value sits in a
// read-only field the user can select and copy.
document.addEventListener("click", function (ev) {
  var b = ev.target.closest("button[data-copy]");
  if (!b) return;
  var field = document.getElementById(b.getAttribute("data-copy"));
  if (!field) return;
  field.select();
  var done = function () { b.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(done, function () { document.execCommand("copy"); done(); });
  } else {
    document.execCommand("copy");
    done();
  }
});
